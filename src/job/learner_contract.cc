#include "job/learner_contract.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

namespace weft {

std::vector<std::pair<std::string, std::string>> LearnerEnvironment(const LearnerLaunch& l) {
  namespace e = learner_env;
  std::vector<std::pair<std::string, std::string>> env = {
      {e::kJobId, l.job_id},
      {e::kCredential, l.credential},
      {e::kPsCredential, l.ps_credential},
      {e::kPsTlsCert, l.ps_tls_cert},
      {e::kPsTlsKey, l.ps_tls_key},
      {e::kAttempt, absl::StrCat(l.attempt)},
      {e::kSpec, l.spec_path},
      {e::kCoordinator, l.coordinator_address},
      {e::kCoordinatorCa, l.coordinator_ca_path},
      {e::kNode, l.node},
      {e::kDataDir, l.data_dir},
      {e::kDataFormat, l.data_format},
      {e::kResultDir, l.result_dir},
      {e::kCheckpointDir, l.checkpoint_dir},
      {e::kLogDir, l.log_dir},
      {e::kModelDir, l.model_dir},
      {e::kLearnerId, absl::StrCat(l.rank + 1)},
      {e::kNumLearners, absl::StrCat(l.world_size)},
      {e::kRank, absl::StrCat(l.rank)},
      {e::kLocalRank, absl::StrCat(l.rank)},
      {e::kWorldSize, absl::StrCat(l.world_size)},
      {e::kThreads, absl::StrCat(l.threads)},
      {e::kWorkDir, l.work_dir},
      {e::kPrivateDir, l.private_dir},
      {e::kSandbox, l.sandbox_required ? "required" : "optional"},
  };
  if (l.generation > 1) {
    env.emplace_back(e::kGeneration, absl::StrCat(l.generation));
    env.emplace_back(e::kGenerationRank, absl::StrCat(l.generation_rank));
  }
  if (l.learners_as_one > 1) env.emplace_back(e::kLearnersAsOne, absl::StrCat(l.learners_as_one));
  if (!l.rendezvous_host.empty()) {
    env.emplace_back(e::kMasterAddr, l.rendezvous_host);
    env.emplace_back(e::kMasterPort, absl::StrCat(l.rendezvous_port));
  }
  if (!l.ps_servers.empty()) env.emplace_back(e::kPsServers, absl::StrJoin(l.ps_servers, ","));
  if (!l.gpus.empty()) env.emplace_back(e::kGpus, absl::StrJoin(l.gpus, ","));
  if (l.ps_server >= 0) env.emplace_back(e::kPsServer, absl::StrCat(l.ps_server));
  if (!l.program_container.runtime.empty()) {
    env.emplace_back(e::kContainer, ProgramContainerToJson(l.program_container));
  }
  return env;
}

std::string ProgramContainerToJson(const ProgramContainer& c) {
  return nlohmann::json{{"runtime", c.runtime},
                        {"engine_config_dir", c.engine_config_dir},
                        {"image", c.image},
                        {"runtime_image", c.runtime_image},
                        {"uid", c.uid},
                        {"network_namespace", c.network_namespace},
                        {"shm_dir", c.shm_dir},
                        {"cgroup_parent", c.cgroup_parent},
                        {"pids_limit", c.pids_limit},
                        {"cpus", c.cpus},
                        {"cpuset", c.cpuset},
                        {"devices", c.devices}}
      .dump();
}

absl::StatusOr<ProgramContainer> ProgramContainerFromJson(const std::string& json) {
  nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(learner_env::kContainer, " is not a JSON object"));
  }
  ProgramContainer c;
  try {
    c.runtime = j.at("runtime").get<std::string>();
    c.engine_config_dir = j.value("engine_config_dir", "");
    c.image = j.at("image").get<std::string>();
    c.runtime_image = j.value("runtime_image", "");
    c.uid = j.at("uid").get<uint32_t>();
    c.network_namespace = j.value("network_namespace", "");
    c.shm_dir = j.value("shm_dir", "");
    c.cgroup_parent = j.value("cgroup_parent", "");
    c.pids_limit = j.value("pids_limit", int64_t{0});
    c.cpus = j.value("cpus", 0.0);
    c.cpuset = j.value("cpuset", std::vector<int>{});
    c.devices = j.value("devices", std::vector<std::string>{});
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(learner_env::kContainer, ": ", e.what()));
  }
  if (c.runtime != "podman" && c.runtime != "bwrap") {
    return absl::InvalidArgumentError(
        absl::StrCat(learner_env::kContainer, ": runtime must be podman or bwrap"));
  }
  return c;
}

const std::vector<std::string>& LearnerEnvironmentNames() {
  namespace e = learner_env;
  static const std::vector<std::string> names = {
      e::kJobId,         e::kAttempt,       e::kCredential,     e::kSpec,
      e::kCoordinator,   e::kNode,          e::kDataDir,        e::kResultDir,
      e::kCheckpointDir, e::kLogDir,        e::kLearnerId,      e::kNumLearners,
      e::kRank,          e::kLocalRank,     e::kWorldSize,      e::kMasterAddr,
      e::kMasterPort,    e::kThreads,       e::kModelDir,       e::kForbiddenToken,
      e::kDataFormat,    e::kWorkDir,       e::kPrivateDir,     e::kSandbox,
      e::kCoordinatorCa, e::kGeneration,    e::kGenerationRank, e::kPsServers,
      e::kPsServer,      e::kLearnersAsOne, e::kContainer,      e::kPsCredential,
      e::kPsTlsCert,     e::kPsTlsKey,      e::kGpus,           e::kCudaVisibleDevices};
  return names;
}

namespace {

// WEFT_PS_SERVERS: comma-separated host:port, at most 64, none empty or over 256 bytes.
absl::Status ParsePsServers(const std::string& text, std::vector<std::string>* out) {
  if (text.empty()) return absl::OkStatus();
  *out = absl::StrSplit(text, ',');
  constexpr size_t kMaxServers = 64, kMaxAddress = 256;
  if (out->size() > kMaxServers) {
    return absl::InvalidArgumentError(
        absl::StrCat(learner_env::kPsServers, " names more than ", kMaxServers, " servers"));
  }
  for (const std::string& a : *out) {
    if (a.empty() || a.size() > kMaxAddress) {
      return absl::InvalidArgumentError(
          absl::StrCat(learner_env::kPsServers, " holds an empty or over-long address"));
    }
  }
  return absl::OkStatus();
}

// A scale-out parameter-server job's variables: its servers, their credential and TLS identity.
absl::Status ReadParameterServerVariables(const std::function<std::string(const char*)>& text,
                                          LearnerLaunch* l) {
  namespace e = learner_env;
  l->ps_credential = text(e::kPsCredential);
  l->ps_tls_cert = text(e::kPsTlsCert);
  l->ps_tls_key = text(e::kPsTlsKey);
  constexpr size_t kMaxPemBytes = 16 << 10;
  if (l->ps_tls_cert.size() > kMaxPemBytes || l->ps_tls_key.size() > kMaxPemBytes) {
    return absl::InvalidArgumentError(absl::StrCat(e::kPsTlsCert, " or ", e::kPsTlsKey,
                                                   " is longer than ", kMaxPemBytes, " bytes"));
  }
  return ParsePsServers(text(e::kPsServers), &l->ps_servers);
}

// WEFT_GPUS: comma-separated device indices, at most 64, each in [0, 1023].
absl::Status ParseGpus(const std::string& text, std::vector<int>* out) {
  if (text.empty()) return absl::OkStatus();
  constexpr size_t kMaxGpus = 64;
  constexpr int kMaxIndex = 1023;
  std::vector<std::string> parts = absl::StrSplit(text, ',');
  for (const std::string& p : parts) {
    int index = -1;
    if (out->size() == kMaxGpus || !absl::SimpleAtoi(p, &index) || index < 0 || index > kMaxIndex) {
      return absl::InvalidArgumentError(absl::StrCat(learner_env::kGpus, " must list at most ",
                                                     kMaxGpus, " device indices in [0, ", kMaxIndex,
                                                     "], comma-separated"));
    }
    out->push_back(index);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LearnerLaunch> LearnerLaunchFromEnvironment(
    const std::function<const char*(const char*)>& getenv) {
  namespace e = learner_env;
  auto text = [&](const char* name, const char* fallback = "") {
    const char* v = getenv(name);
    return std::string(v ? v : fallback);
  };
  auto required = [&](const char* name, std::string* out) -> absl::Status {
    *out = text(name);
    if (out->empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " is not set: weft-learner is started by weftd"));
    }
    return absl::OkStatus();
  };
  auto number = [&](const char* name, auto fallback, auto* out) -> absl::Status {
    const char* v = getenv(name);
    if (v == nullptr || *v == '\0') {
      *out = fallback;
      return absl::OkStatus();
    }
    if (!absl::SimpleAtoi(v, out)) {
      return absl::InvalidArgumentError(absl::StrCat(name, " must be an integer, got '", v, "'"));
    }
    return absl::OkStatus();
  };
  LearnerLaunch l;
  for (auto [name, field] : {std::pair{e::kJobId, &l.job_id},
                             {e::kSpec, &l.spec_path},
                             {e::kCoordinator, &l.coordinator_address},
                             {e::kResultDir, &l.result_dir}}) {
    if (absl::Status s = required(name, field); !s.ok()) return s;
  }
  for (auto [name, field, fallback] : {std::tuple{e::kRank, &l.rank, 0},
                                       {e::kWorldSize, &l.world_size, 1},
                                       {e::kMasterPort, &l.rendezvous_port, 0},
                                       {e::kThreads, &l.threads, 1}}) {
    if (absl::Status s = number(name, fallback, field); !s.ok()) return s;
  }
  if (absl::Status s = number(e::kAttempt, int64_t{1}, &l.attempt); !s.ok()) return s;
  if (absl::Status s = number(e::kGeneration, int64_t{1}, &l.generation); !s.ok()) return s;
  if (absl::Status s = number(e::kGenerationRank, -1, &l.generation_rank); !s.ok()) return s;
  const bool joins = l.generation > 1;
  const int rank = joins ? l.generation_rank : l.rank;
  if (l.world_size < 1 || l.rank < 0 || rank < 0 || rank >= l.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(joins ? e::kGenerationRank : e::kRank, " ", rank,
                                                   " is not in [0, ", e::kWorldSize, " ",
                                                   l.world_size, ")"));
  }
  if (absl::Status s = number(e::kLearnersAsOne, 1, &l.learners_as_one); !s.ok()) return s;
  if (l.learners_as_one != 1 && (l.learners_as_one != l.world_size || joins)) {
    return absl::InvalidArgumentError(absl::StrCat(e::kLearnersAsOne, " must be 1 or ",
                                                   e::kWorldSize, " ", l.world_size, ", got ",
                                                   l.learners_as_one));
  }
  if (l.world_size > 1 && l.rendezvous_port <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(e::kMasterPort, " must be set when ", e::kWorldSize, " > 1"));
  }
  l.credential = text(e::kCredential);
  l.coordinator_ca_path = text(e::kCoordinatorCa);
  l.node = text(e::kNode);
  l.data_dir = text(e::kDataDir);
  l.data_format = text(e::kDataFormat);
  if (l.data_format.empty()) l.data_format = "idx";  // from a weftd that did not set it
  l.checkpoint_dir = text(e::kCheckpointDir);
  l.log_dir = text(e::kLogDir);
  l.model_dir = text(e::kModelDir);
  l.work_dir = text(e::kWorkDir);
  l.private_dir = text(e::kPrivateDir);
  l.sandbox_required = text(e::kSandbox) != "optional";
  if (absl::Status s = ReadParameterServerVariables(text, &l); !s.ok()) return s;
  if (absl::Status s = ParseGpus(text(e::kGpus), &l.gpus); !s.ok()) return s;
  if (const std::string c = text(e::kContainer); !c.empty()) {
    absl::StatusOr<ProgramContainer> pc = ProgramContainerFromJson(c);
    if (!pc.ok()) return pc.status();
    l.program_container = *std::move(pc);
  }
  l.rendezvous_host = text(e::kMasterAddr);
  if (l.world_size > 1 && l.rendezvous_host.empty()) l.rendezvous_host = "127.0.0.1";
  return l;
}

}  // namespace weft
