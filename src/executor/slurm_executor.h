// Executor on a Slurm cluster (issue 17). weft's scheduler still decides which node each learner
// runs on; Slurm runs it there. Each learner is one Slurm batch job pinned to its node
// (sbatch --nodelist=NODE --nodes=1 --ntasks=1 --cpus-per-task=THREADS [--mem=MB]), named
// weft-JOB-aATTEMPT-rRANK, its output appended to the learner's log (LearnerLogPath), its
// environment exactly the learner contract's (--export=NIL and a launch script that sets it).
// With a container runtime the script execs podman, which runs the learner in a container of
// weft's runtime image as its job's uid (the uid in the Slurm job's comment, for adoption), on
// the host's network (its gang spans nodes; it reaches weftd's coordinator over TCP), its memory
// held by the container's own limit.
// One Slurm job per learner rather than one per placement: a learner's end, its cancellation and
// its adoption are then each one Slurm job's, as a learner is one process for the local
// executor; the gang is weft's to keep (its scheduler places all ranks in one round).
//
// The Slurm job id is the learner's handle: what Start returns and Adopt takes in place of a
// pid. Exits are learned by polling squeue for the tracked ids (at most once per
// `poll_interval_ms`), then scontrol's JobState and ExitCode for one that ended; a job Slurm has
// already forgotten ended with its status unknown. A node failure (NODE_FAIL) is a lost learner
// (reported as killed by SIGKILL); Slurm's memory limit (OUT_OF_MEMORY) is killed_for; an
// scancel from outside weft is the exit's cause (and counts as SIGTERM at least). Stop sends
// SIGTERM through scancel and, `grace_ms` later (on the next Reap after it), scancel again,
// which Slurm ends with SIGKILL after its KillWait.
//
// Thread-safety: safe to call from several threads.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "executor/container_runtime.h"
#include "executor/executor.h"
#include "executor/job_uids.h"
#include "executor/learner_container.h"

namespace weft {

class SlurmExecutor : public Executor {
 public:
  struct Options {
    std::string learner_binary;  // the same path on every node
    std::string slurm_conf;      // SLURM_CONF for Slurm's commands ("": Slurm's default)
    std::string partition;       // "": the cluster's default partition
    int64_t poll_interval_ms = 1000;
    // Learners in containers (executor/learner_container.h) on their nodes: the engine (its
    // configuration at the same path on every node), weft's runtime image and binaries, and the
    // jobs' uid range. Null: weft-learner runs on the node as Slurm's job user.
    std::shared_ptr<const PodmanRuntime> runtime;
    LearnerContainerOptions container;
    uid_t first_uid = 1000000000;
    int uid_count = 65536;
  };
  // A node as Slurm reports it (sinfo).
  struct SlurmNode {
    std::string name;
    int cpus = 0;
    int64_t memory_mb = 0;
    int gpus = 0;       // gres gpu:N
    std::string state;  // "idle", "mixed", "allocated", "down", …
  };

  SlurmExecutor(Options options, const Clock& clock);

  // Submits the learner; its Slurm job id. Internal with sbatch's message if Slurm refuses it.
  absl::StatusOr<int64_t> Start(const LearnerLaunch& launch) override;
  absl::Status Stop(const std::string& job_id, int64_t grace_ms) override;
  absl::Status Kill(const std::string& job_id, int rank) override;
  std::vector<LearnerExit> Reap() override;
  // NotFound unless Slurm job `handle` is queued or running under this learner's name.
  absl::Status Adopt(const LearnerLaunch& launch, int64_t handle) override;
  int Running(const std::string& job_id) override;
  // The node's address (scontrol's NodeAddr) and a port free on this host when asked (a node on
  // another host might have it taken: then rank 0 fails to bind and the job restarts).
  absl::StatusOr<std::pair<std::string, int>> RendezvousAddress(const std::string& node) override;
  // Slurm picks which of a node's GPUs a learner's Slurm job gets (--gres=gpu:N); the learner
  // reports them (SLURM_JOB_GPUS) and weftd records them.
  bool ChoosesGpus() const override { return true; }
  std::string Runtime() const override {
    if (!refused_runtime().empty()) return refused_runtime();
    return options_.runtime ? "podman" : "none";
  }
  std::string RuntimeDescription() const override;

  // The cluster's nodes (of Options::partition, if given), each once, by name. Unavailable if
  // sinfo fails.
  absl::StatusOr<std::vector<SlurmNode>> Nodes();

 private:
  struct Learner {
    LearnerLaunch launch;
    int64_t handle = 0;
    bool holds_uid = false;            // holds its job's uid in uids_
    std::optional<TimeMs> kill_at_ms;  // scancel (SIGKILL) then, if still running
    // weft's Stop cancelled it while it still ran. A learner already ending when Stop came
    // (COMPLETING: exited, or cancelled by someone else) is not counted as weft's cancel.
    bool cancelled_by_weft = false;
  };
  struct CommandOutput {
    int exit_code = -1;
    std::string text;  // stdout and stderr
  };
  // Runs a Slurm command (argv[0] on PATH) with SLURM_CONF, without a shell; its output.
  CommandOutput Command(const std::vector<std::string>& argv) const;
  // squeue's state of each of `handles` it still knows ("RUNNING", "COMPLETING", "CANCELLED", …);
  // nullopt if squeue failed.
  std::optional<std::map<int64_t, std::string>> States(const std::vector<int64_t>& handles) const;
  // How Slurm job `handle` ended, from scontrol; status_unknown if Slurm forgot it.
  LearnerExit ExitOf(const Learner& l) const;
  static std::string SlurmName(const LearnerLaunch& launch);
  // The launch script's last lines: exec the learner on the node, or — with a runtime — make
  // its attempt's shared memory there and run the engine that runs it in its container as `uid`,
  // the shell staying to relay weft's signals to the container and to remove it.
  absl::StatusOr<std::string> ExecLines(const LearnerLaunch& launch, uid_t uid,
                                        int64_t stop_seconds) const;
  // How long a container may take to stop on TERM before podman kills it: a second less than
  // Slurm's KillWait (scontrol show config, asked once; 30 s, Slurm's default, if it cannot
  // say), so that the shell relaying it is not killed first and the container left behind.
  int64_t ContainerStopSeconds();
  // The scancel that stops (TERM) or kills Slurm job `handle`'s learner.
  std::vector<std::string> SignalCommand(int64_t handle, bool kill) const;

  const Options options_;
  const Clock& clock_;
  JobUids uids_;  // each learner in a container holds its job's uid once
  absl::Mutex mu_;
  std::map<int64_t, Learner> learners_ ABSL_GUARDED_BY(mu_);  // not yet reaped, by handle
  TimeMs last_poll_ms_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t container_stop_seconds_ ABSL_GUARDED_BY(mu_) = 0;  // 0: not asked yet
};

}  // namespace weft
