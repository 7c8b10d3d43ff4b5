// weft-ps: one shard of a job's scale-out parameter server (training.ps.servers > 1), started by
// a weftd executor beside the job's learners. It serves proto/ps.proto on --listen until rank 0
// shuts it down (exit 0) or it is sent SIGTERM (exit 143). The job and its credential come from
// the learner environment (WEFT_JOB_ID, WEFT_JOB_CREDENTIAL), never from the command line, which
// any user of the node can read.
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
  const std::string job_id = Env(weft::learner_env::kJobId);
  const std::string credential = Env(weft::learner_env::kCredential);
  if (job_id.empty() || credential.empty()) {
    spdlog::error("weft-ps: {} and {} must be set", weft::learner_env::kJobId,
                  weft::learner_env::kCredential);
    return weft::kLearnerExitUserError;
  }
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  absl::Status s = weft::ps::ServeShard(listen, job_id, credential, &g_stop);
  if (!s.ok()) {
    spdlog::error("weft-ps: {}", std::string(s.message()));
    return weft::kLearnerExitRetry;
  }
  return g_stop ? weft::kLearnerExitStopped : weft::kLearnerExitOk;
}
