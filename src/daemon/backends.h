// Where weftd keeps its records and runs its learners: the store (--store), the executor
// (--executor) and the nodes it schedules on (this host, --config's, or Slurm's).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "executor/executor.h"
#include "executor/job_isolation.h"
#include "scheduler/cluster.h"
#include "store/leadership.h"
#include "store/store.h"

namespace weft::daemon {

// This host as one node: all its cores and its physical memory.
weft::scheduler::Node ThisHost();

// Reads `nodes: [{name, cpus, memory_mb, gpus, cpuset}]` from a YAML config file; `cpuset` (a
// list of CPU ids) pins that node's learners to those CPUs. InvalidArgument naming the file and
// the entry.
absl::StatusOr<std::vector<weft::scheduler::Node>> ReadNodes(
    const std::string& path, std::map<std::string, std::vector<int>>* cpusets);

// What --max-store-bytes means for a SQLite store at `db_path` on the disk of `data_dir`: a
// flag > 0 as it is, 0 none (the disk's), -1 the store's size now plus a quarter of the disk's
// free space, at least 256 MiB — so one tenant filling the store leaves room on the disk for
// every tenant's checkpoints and logs. Bytes.
int64_t StoreCap(int64_t flag, const std::string& db_path, const std::string& data_dir);

// The store `store_flag` names: "sqlite" (DATA_DIR/weft.db, capped at `max_store_bytes` if > 0)
// or a PostgreSQL connection URI (then no weft.db is created). `*description` says which, for
// the log (never a password). `*election` is the leader election of a store weftds share (the
// PostgreSQL store's, owned by the store), or nullptr.
absl::StatusOr<std::unique_ptr<weft::Store>> OpenStore(const std::string& store_flag,
                                                       int64_t max_store_bytes,
                                                       const std::string& data_dir,
                                                       std::string* description,
                                                       weft::Leadership** election);

struct ExecutorFlags {
  std::string executor;         // local | slurm
  std::string learner;          // weft-learner's path
  std::string slurm_partition;  // "": every node
  std::string memory_limits;    // auto | cgroup | watchdog (local executor)
  std::string runtime;          // podman | none (executor/runtime_setup.h)
  std::string runtime_image;    // weft's runtime image
  int64_t pids_limit = 4096;    // per learner
  int64_t first_job_uid = 1000000000;
};
// The executor `flags.executor` names. With Slurm the nodes are the cluster's (sinfo; nodes that
// are down, drained or failing left out), in place of `*nodes`. Its learners are contained by
// `flags.runtime`, reaching weftd through `channels` (borrowed, to outlive the executor); a
// runtime that cannot work here leaves an executor that refuses learners with the reason
// (Executor::Available), and says so in the log.
absl::StatusOr<std::unique_ptr<weft::Executor>> MakeExecutor(
    const ExecutorFlags& flags, const std::string& data_dir,
    std::vector<weft::scheduler::Node>* nodes, weft::AttemptChannels& channels);

// The secret behind learners' per-job credentials (HMAC of the job id), kept in
// <data-dir>/learner.key (0600) across restarts (and takeovers) so adopted learners keep
// authenticating; made on the first start. FailedPrecondition for a key too short to be safe.
absl::StatusOr<std::string> LearnerKey(weft::Env& env, const std::string& data_dir);

// Tenancy: the `default` tenant, and the admin token on the first start (its path printed).
absl::Status SetUpTenancy(weft::Env& env, weft::Store& store, const std::string& data_dir);

// Registers Debian's Fashion-MNIST and MNIST, where installed, for every tenant (unless a data
// set has the name), saying which.
absl::Status RegisterDebianDatasets(weft::Store& store);

}  // namespace weft::daemon
