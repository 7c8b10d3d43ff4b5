#include "daemon/backends.h"

#include <sched.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/ids.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/text.h"
#include "control/datasets.h"
#include "control/tenancy.h"
#include "daemon/gpu_inventory.h"
#include "executor/local_executor.h"
#include "executor/memory_cgroups.h"
#include "executor/runtime_setup.h"
#include "executor/slurm_executor.h"
#include "store/pg_store.h"
#include "store/sqlite_store.h"

namespace weft::daemon {
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

// The local executor, its learners in the runtime the flags name. Learners in containers are
// always held by the kernel (a cgroup per learner: their containers' cgroups go below it).
absl::StatusOr<std::unique_ptr<weft::Executor>> MakeLocalExecutor(const ExecutorFlags& flags,
                                                                  const std::string& data_dir,
                                                                  weft::AttemptChannels& channels) {
  const bool contained = flags.runtime != "none";
  if (contained && flags.memory_limits == "watchdog") {
    return absl::InvalidArgumentError(
        "--memory-limits watchdog: learners in containers are held by the kernel (cgroup); "
        "use --runtime none for a watchdog");
  }
  if (!contained) {
    ASSIGN_OR_RETURN(auto cgroups, MemoryLimits(flags.memory_limits, data_dir));
    spdlog::warn(
        "runtime none: learners run UNCONFINED as weftd's user, tenants' code with weftd's "
        "rights (weftd --runtime none); use it only where every tenant is trusted");
    return std::unique_ptr<weft::Executor>(std::make_unique<weft::LocalExecutor>(
        flags.learner, weft::SystemClock::Get(), std::move(cgroups)));
  }
  absl::StatusOr<std::unique_ptr<weft::MemoryCgroups>> cgroups = MemoryLimits("cgroup", data_dir);
  const std::string tag = weft::Sha256Hex(data_dir).substr(0, 12);
  absl::StatusOr<std::unique_ptr<weft::ContainerLauncher>> containers =
      cgroups.ok() ? weft::SetUpRuntime(
                         {flags.runtime, data_dir, flags.runtime_image, flags.learner,
                          flags.pids_limit, static_cast<uid_t>(flags.first_job_uid), 65536, tag},
                         channels)
                   : cgroups.status();
  auto executor = std::make_unique<weft::LocalExecutor>(
      flags.learner, weft::SystemClock::Get(), cgroups.ok() ? *std::move(cgroups) : nullptr,
      containers.ok() ? *std::move(containers) : nullptr);
  if (!containers.ok()) {
    spdlog::error("runtime {}: {}; every job is refused until this is mended", flags.runtime,
                  containers.status().message());
    executor->Refuse(absl::UnavailableError(
                         absl::StrCat("the container runtime (", flags.runtime,
                                      ") cannot run learners: ", containers.status().message())),
                     flags.runtime);
  } else {
    spdlog::info("runtime {}: {}", flags.runtime, executor->RuntimeDescription());
  }
  return std::unique_ptr<weft::Executor>(std::move(executor));
}

}  // namespace

weft::scheduler::Node ThisHost() {
  weft::scheduler::Node n;
  n.name = "local";
  n.capacity.cpus = std::max(1u, std::thread::hardware_concurrency());
  n.capacity.memory_mb =
      static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE) / (1024 * 1024);
  // Its GPUs, as the vendors' CDI specs name them (none without a spec).
  std::vector<std::string> warnings;
  n.gpu_devices = DiscoverCdiGpus(DefaultCdiDirs(), &warnings);
  for (const std::string& w : warnings) spdlog::warn("{}", w);
  n.capacity.gpus = static_cast<int>(n.gpu_devices.size());
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
      absl::StatusOr<std::vector<weft::scheduler::GpuDevice>> gpus =
          ReadGpus(y["gpus"], absl::StrCat(path, ": nodes[", i, "]"));
      if (!gpus.ok()) return gpus.status();
      n.gpu_devices = *std::move(gpus);
      n.capacity.gpus = static_cast<int>(n.gpu_devices.size());
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
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": ", e.what(), " (expected nodes: [{name, cpus, memory_mb, gpus, cpuset}])"));
  }
  return nodes;
}

int64_t StoreCap(int64_t flag, const std::string& db_path, const std::string& data_dir) {
  if (flag >= 0) return flag;
  constexpr int64_t kAtLeast = int64_t{256} << 20;
  int64_t now = 0;
  for (const char* suffix : {"", "-wal"}) {
    struct stat st {};
    if (stat((db_path + suffix).c_str(), &st) == 0) now += st.st_size;
  }
  struct statvfs fs {};
  if (statvfs(data_dir.c_str(), &fs) != 0) return 0;  // cannot tell: the disk's
  const int64_t free_bytes = static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize);
  return std::max(kAtLeast, now + free_bytes / 4);
}

absl::StatusOr<std::unique_ptr<weft::Store>> OpenStore(const std::string& store_flag,
                                                       int64_t max_store_bytes,
                                                       const std::string& data_dir,
                                                       std::string* description,
                                                       weft::Leadership** election) {
  *election = nullptr;
  if (store_flag == "sqlite") {
    *description = data_dir + "/weft.db";
    const int64_t cap = StoreCap(max_store_bytes, *description, data_dir);
    if (max_store_bytes < 0) {
      spdlog::info("the store may grow to {} (a quarter of the free disk; --max-store-bytes)",
                   weft::FormatMib(cap));
    }
    return weft::SqliteStore::Open(*description, cap);
  }
  auto store = weft::PgStore::Open(store_flag);
  if (!store.ok()) return store.status();
  *description = absl::StrCat("postgresql ", (*store)->Describe());
  *election = &(*store)->leadership();
  return std::unique_ptr<weft::Store>(std::move(*store));
}

absl::StatusOr<std::unique_ptr<weft::Executor>> MakeExecutor(
    const ExecutorFlags& flags, const std::string& data_dir,
    std::vector<weft::scheduler::Node>* nodes, weft::AttemptChannels& channels) {
  if (flags.executor == "local") return MakeLocalExecutor(flags, data_dir, channels);
  weft::SlurmExecutor::Options slurm_options;
  slurm_options.learner_binary = flags.learner;
  slurm_options.partition = flags.slurm_partition;
  absl::Status refusal;
  if (flags.runtime == "bwrap") {
    refusal = absl::FailedPreconditionError(
        "the Slurm executor runs learners in podman's containers (--runtime podman), or "
        "unconfined (--runtime none); bwrap is the local executor's");
  } else if (flags.runtime != "none") {
    // The engine's configuration at <data_dir>/run/podman: the same path on every node, as the
    // data directory is (docs/deploy.md).
    absl::StatusOr<std::unique_ptr<weft::PodmanRuntime>> podman =
        weft::SetUpPodman({flags.runtime, data_dir, flags.runtime_image, flags.learner,
                           flags.pids_limit, static_cast<uid_t>(flags.first_job_uid), 65536, ""});
    if (podman.ok()) {
      slurm_options.runtime = *std::move(podman);
      weft::LearnerContainerOptions& c = slurm_options.container;
      c.image = flags.runtime_image;
      c.learner_binary = flags.learner;
      c.library_dirs = weft::LearnerLibraryDirs();
      c.pids_limit = flags.pids_limit;
      c.host_network = true;      // a gang spans nodes; weftd is reached over TCP
      c.own_memory_limit = true;  // no cgroup of weftd's on a Slurm node
      slurm_options.first_uid = static_cast<uid_t>(flags.first_job_uid);
    } else {
      refusal = podman.status();
    }
  }
  auto slurm =
      std::make_unique<weft::SlurmExecutor>(std::move(slurm_options), weft::SystemClock::Get());
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
    // Slurm chooses which of the node's GPUs a learner's Slurm job gets (its gres); weft counts
    // them by index and records Slurm's choice (SlurmExecutor::ChoosesGpus).
    node.gpu_devices = weft::scheduler::CountedGpus(n.gpus);
    nodes->push_back(node);
  }
  if (nodes->empty()) return absl::FailedPreconditionError("Slurm reports no usable node");
  spdlog::info("executor: Slurm, {} node(s) from sinfo", nodes->size());
  if (!refusal.ok()) {
    spdlog::error("runtime {}: {}; every job is refused until this is mended", flags.runtime,
                  refusal.message());
    slurm->Refuse(
        absl::UnavailableError(absl::StrCat("the container runtime (", flags.runtime,
                                            ") cannot run learners: ", refusal.message())),
        flags.runtime);
  } else {
    spdlog::info("runtime {}: {}", flags.runtime, slurm->RuntimeDescription());
  }
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
  if (auto s = weft::EnsureDefaultTenant(store, now); !s.ok()) return s;
  auto admin = weft::EnsureAdminToken(store, data_dir, now, env);
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

}  // namespace weft::daemon
