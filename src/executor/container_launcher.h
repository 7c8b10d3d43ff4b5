// How the local executor puts a learner in its container. A built-in or TorchScript learner, or
// a parameter server, runs whole in a container of weft's runtime image (executor/
// learner_container.h). A command job's learner is a supervisor (weft-learner) that stays on the
// host, trusted, and runs the tenant's program in a container of the job's image (train/
// command_process.h), as the executor tells it in WEFT_CONTAINER (job/learner_contract.h). Both
// kinds get their attempt's shared setup (executor/job_isolation.h) and nothing of weftd's
// environment.
//
// Thread-safety: Prepare and Release may be called from any thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "executor/container_runtime.h"
#include "executor/job_isolation.h"
#include "executor/learner_container.h"
#include "job/learner_contract.h"

namespace weft {

class ContainerLauncher {
 public:
  struct Options {
    LearnerContainerOptions learner;  // weft's runtime image, the binaries, the pids limit
    std::string engine_config_dir;    // PodmanRuntime::Options::config_dir, for supervisors
  };
  // `runtime` and `isolation` are owned.
  ContainerLauncher(std::unique_ptr<ContainerRuntime> runtime, Options options,
                    std::unique_ptr<JobIsolation> isolation);

  struct Launch {
    RuntimeCommand command;  // what the executor runs as the learner's process
    // Whether that process is to be born in the learner's cgroup (the runtime does not place
    // its containers' cgroups itself: bubblewrap).
    bool join_cgroup = false;
    uid_t uid = 0;          // the job's uid
    std::string container;  // the container's name; "" for a command job's supervisor
  };
  // The process that runs `launch` contained: its cgroup's hierarchy path is `cgroup_path` (""
  // when it has none); `adopted_uid` for a learner an earlier weftd started (only the setup is
  // joined then; the command is not run). Joins the attempt's setup, which Release leaves.
  // Errors of JobIsolation::Join, PrepareJobFiles and ContainerRuntime::Command.
  absl::StatusOr<Launch> Prepare(const LearnerLaunch& launch, const std::string& cgroup_path,
                                 std::optional<uid_t> adopted_uid = std::nullopt);
  // One learner of `launch`'s attempt has ended.
  void Release(const LearnerLaunch& launch);
  // What an earlier weftd left of attempts nothing holds now (after adopting).
  int RemoveUnused() { return isolation_->RemoveUnused(); }

  const ContainerRuntime& runtime() const { return *runtime_; }

 private:
  std::unique_ptr<ContainerRuntime> runtime_;
  Options options_;  // (on_image set from the runtime)
  std::unique_ptr<JobIsolation> isolation_;
  std::atomic<uint64_t> serial_{0};  // containers started: their names' suffix
};

// The environment of a process weft starts on the host (a command job's supervisor, an
// unconfined learner): PATH, LANG, TZ, the locale, the operator's WEFT_LEARNER_* knobs
// (OperatorLearnerVariables) and the sanitizers' *SAN_OPTIONS of weftd's own environment where
// set — nothing else of it (no PGPASSWORD, no WEFT_TOKEN) — then the contract's variables of
// `launch`.
std::vector<std::string> HostLearnerEnvironment(const LearnerLaunch& launch);

}  // namespace weft
