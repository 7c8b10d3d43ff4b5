#include "weftd_backends.h"

#include <sched.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "api/auth.h"
#include "common/files.h"
#include "common/ids.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "control/datasets.h"
#include "executor/local_executor.h"
#include "executor/memory_cgroups.h"
#include "executor/slurm_executor.h"
#include "store/pg_store.h"
#include "store/sqlite_store.h"

namespace weftd {
namespace {

// How learners are held to resources.memory_mb (--memory-limits): a memory cgroup per learner
// where the host gives weftd one, else (null) the executor's watchdog. FailedPrecondition under
// `cgroup` on a host without one.
absl::StatusOr<std::unique_ptr<weft::MemoryCgroups>> MemoryLimits(const std::string& mode,
                                                                  const std::string& data_dir) {
  std::unique_ptr<weft::MemoryCgroups> cgroups;
  if (mode == "watchdog") spdlog::info("memory limits: a watchdog (--memory-limits watchdog)");
  if (mode != "watchdog") {
    // One parent cgroup per data directory: weftd processes sharing a cgroup keep apart.
    auto found = weft::MemoryCgroups::ForThisProcess(weft::Sha256Hex(data_dir).substr(0, 12));
    if (found.ok()) {
      cgroups = *std::move(found);
    } else if (mode == "cgroup") {
      return found.status();
    } else {
      spdlog::info("memory limits: a watchdog ({})", found.status().message());
    }
  }
  if (cgroups) spdlog::info("memory limits: the kernel, a memory {}", cgroups->Describe());
  return cgroups;
}

}  // namespace

weft::scheduler::Node ThisHost() {
  weft::scheduler::Node n;
  n.name = "local";
  n.capacity.cpus = std::max(1u, std::thread::hardware_concurrency());
  n.capacity.memory_mb =
      static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE) / (1024 * 1024);
  n.capacity.gpus = 0;
  return n;
}

absl::StatusOr<std::vector<weft::scheduler::Node>> ReadNodes(
    const std::string& path, std::map<std::string, std::vector<int>>* cpusets) {
  std::vector<weft::scheduler::Node> nodes;
  try {
    YAML::Node cfg = YAML::LoadFile(path);
    if (!cfg["nodes"] || !cfg["nodes"].IsSequence() || cfg["nodes"].size() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": nodes: must be a non-empty list"));
    }
    for (size_t i = 0; i < cfg["nodes"].size(); ++i) {
      YAML::Node y = cfg["nodes"][i];
      weft::scheduler::Node n;
      n.name = y["name"].as<std::string>(absl::StrCat("node-", i));
      n.capacity.cpus = y["cpus"].as<double>();
      n.capacity.memory_mb = y["memory_mb"].as<int64_t>();
      n.capacity.gpus = y["gpus"].as<int>(0);
      if (n.capacity.cpus <= 0 || n.capacity.memory_mb <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": nodes[", i, "]: cpus and memory_mb must be positive"));
      }
      if (y["cpuset"]) {
        std::vector<int> cpus = y["cpuset"].as<std::vector<int>>();
        for (int c : cpus) {
          if (c < 0 || c >= CPU_SETSIZE) {
            return absl::InvalidArgumentError(absl::StrCat(
                path, ": nodes[", i, "].cpuset: CPU ids must be in [0, ", CPU_SETSIZE, ")"));
          }
        }
        (*cpusets)[n.name] = cpus;
      }
      nodes.push_back(n);
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", e.what(), " (expected nodes: [{name, cpus, memory_mb, gpus}])"));
  }
  return nodes;
}

absl::StatusOr<std::unique_ptr<weft::Store>> OpenStore(const std::string& store_flag,
                                                       int64_t max_store_bytes,
                                                       const std::string& data_dir,
                                                       std::string* description) {
  if (store_flag == "sqlite") {
    *description = data_dir + "/weft.db";
    return weft::SqliteStore::Open(*description, max_store_bytes);
  }
  auto store = weft::PgStore::Open(store_flag);
  if (!store.ok()) return store.status();
  *description = absl::StrCat("postgresql ", (*store)->Describe());
  return std::unique_ptr<weft::Store>(std::move(*store));
}

absl::StatusOr<std::unique_ptr<weft::Executor>> MakeExecutor(
    const ExecutorFlags& flags, const std::string& data_dir,
    std::vector<weft::scheduler::Node>* nodes) {
  if (flags.executor == "local") {
    ASSIGN_OR_RETURN(auto cgroups, MemoryLimits(flags.memory_limits, data_dir));
    return std::unique_ptr<weft::Executor>(std::make_unique<weft::LocalExecutor>(
        flags.learner, weft::SystemClock::Get(), std::move(cgroups)));
  }
  auto slurm = std::make_unique<weft::SlurmExecutor>(
      weft::SlurmExecutor::Options{flags.learner, "", flags.slurm_partition, 1000},
      weft::SystemClock::Get());
  ASSIGN_OR_RETURN(std::vector<weft::SlurmExecutor::SlurmNode> inventory, slurm->Nodes());
  nodes->clear();
  for (const auto& n : inventory) {
    if (absl::StrContains(n.state, "down") || absl::StrContains(n.state, "drain") ||
        absl::StrContains(n.state, "fail")) {
      spdlog::warn("Slurm node {} is {}: not scheduled on", n.name, n.state);
      continue;
    }
    weft::scheduler::Node node;
    node.name = n.name;
    node.capacity = {static_cast<double>(n.cpus), n.memory_mb, n.gpus};
    nodes->push_back(node);
  }
  if (nodes->empty()) return absl::FailedPreconditionError("Slurm reports no usable node");
  spdlog::info("executor: Slurm, {} node(s) from sinfo", nodes->size());
  return std::unique_ptr<weft::Executor>(std::move(slurm));
}

constexpr size_t kMinLearnerKeyBytes = 32;

// The secret behind learners' per-job credentials (HMAC of the job id), kept in
// <data-dir>/learner.key (0600) across restarts so adopted learners keep authenticating.
absl::StatusOr<std::string> LearnerKey(weft::Env& env, const std::string& data_dir) {
  const std::string key_file = data_dir + "/learner.key";
  auto key = env.ReadFile(key_file);
  if (key.ok() && key->size() < kMinLearnerKeyBytes) {
    // A short key would make every job's credential guessable; an empty one, every learner's.
    return absl::FailedPreconditionError(
        absl::StrCat(key_file, " holds ", key->size(), " bytes; a learner key needs at least ",
                     kMinLearnerKeyBytes,
                     " (remove the file and weftd makes a new one; learners still "
                     "running with the old key are then refused and their jobs restart)"));
  }
  if (key.ok()) return key;
  std::string fresh = weft::NewSecretToken();
  if (auto s = weft::WriteFileAtomic(env, key_file, fresh, 0600); !s.ok()) return s;
  return fresh;
}

// Tenancy: the `default` tenant, and the admin token on the first start. Only its path is
// printed: weftd's output usually ends up in a log file, and no log line holds a secret.
absl::Status SetUpTenancy(weft::Env& env, weft::Store& store, const std::string& data_dir) {
  const weft::TimeMs now = weft::SystemClock::Get().NowMs();
  if (auto s = weft::api::EnsureDefaultTenant(store, now); !s.ok()) return s;
  auto admin = weft::api::EnsureAdminToken(store, data_dir, now, env);
  if (!admin.ok()) return admin.status();
  if (admin->has_value()) {
    std::cout << "weftd: created the admin token in " << data_dir
              << "/admin.token (mode 0600); use it with\n  export WEFT_TOKEN=$(cat " << data_dir
              << "/admin.token)\n"
              << std::flush;
  }
  return absl::OkStatus();
}

// Registers Debian's Fashion-MNIST and MNIST, where installed, for every tenant (unless a data
// set has the name), saying which.
absl::Status RegisterDebianDatasets(weft::Store& store) {
  auto registered = weft::RegisterDefaultDatasets(store, weft::SystemClock::Get());
  if (!registered.ok()) return registered.status();
  for (const std::string& name : *registered) {
    spdlog::info("registered data set {} for every tenant (weft dataset list)", name);
  }
  return absl::OkStatus();
}

}  // namespace weftd
