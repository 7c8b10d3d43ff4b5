// weft-ps: one shard of a job's scale-out parameter server (training.ps.servers > 1), started by
// a weftd executor beside the job's learners. It serves proto/ps.proto on --listen until rank 0
// shuts it down (exit 0; asked to stop by SIGTERM, it serves on until then, so that rank 0 can
// checkpoint from it, unless it holds nothing yet). The job and its credential come from
// the learner environment (WEFT_JOB_ID, WEFT_PS_CREDENTIAL: the attempt's parameter-server
// credential, which the coordinator refuses) and, when weftd has TLS, its TLS identity
// (WEFT_PS_TLS_CERT, WEFT_PS_TLS_KEY: the attempt's, which its learners pin), never from the
// command line, which any user of the node can read.
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <string>

#include "CLI/CLI.hpp"
#include "job/learner_contract.h"
#include "ps/shard_service.h"
#include "spdlog/spdlog.h"

namespace {

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop = true; }

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"weft-ps: one shard of a job's parameter server"};
  std::string listen;
  app.add_option("--listen", listen, "host:port to serve on (port 0: any free port)")->required();
  CLI11_PARSE(app, argc, argv);
  namespace e = weft::learner_env;
  weft::ps::ShardServerOptions options;
  options.listen = listen;
  options.job_id = Env(e::kJobId);
  options.credential = Env(e::kPsCredential);
  options.tls = {Env(e::kPsTlsCert), Env(e::kPsTlsKey)};
  if (options.job_id.empty() || options.credential.empty()) {
    spdlog::error("weft-ps: {} and {} must be set", e::kJobId, e::kPsCredential);
    return weft::kLearnerExitUserError;
  }
  if (options.tls.cert_pem.empty() != options.tls.key_pem.empty()) {
    spdlog::error("weft-ps: {} and {} go together", e::kPsTlsCert, e::kPsTlsKey);
    return weft::kLearnerExitUserError;
  }
  // Fault injection for tests: drop the acknowledgement of every n-th push (docs/design.md).
  if (const std::string drop = Env("WEFT_LEARNER_PS_DROP_ACKS"); !drop.empty()) {
    options.drop_ack_every = std::atoll(drop.c_str());
  }
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  absl::Status s = weft::ps::ServeShard(options, &g_stop);
  if (!s.ok()) {
    spdlog::error("weft-ps: {}", std::string(s.message()));
    return weft::kLearnerExitRetry;
  }
  // Shut down by rank 0 (even after a stop was asked for: it checkpointed first): 0.
  return weft::kLearnerExitOk;
}
