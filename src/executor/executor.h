// Executors start and stop a job's learner processes and report how they ended. The local
// executor runs them on this host; Slurm and Kubernetes executors are the way past one machine.
//
// Thread-safety: implementations are safe to call from several threads.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "job/learner_contract.h"

namespace weft {

// How a learner process ended.
struct LearnerExit {
  std::string job_id;
  int64_t attempt = 0;
  int rank = 0;
  int64_t pid = 0;
  int exit_code = -1;           // valid when signal == 0 and !status_unknown
  int signal = 0;               // the signal that killed it, 0 if it exited
  bool status_unknown = false;  // an adopted learner (not our child): it ended, how is unknown
  // Set when the executor killed it for going over its limits, e.g. "out of memory: 3.1 GiB
  // used, 2.0 GiB requested". Such a learner would do the same again: its job fails.
  std::string killed_for;
  // What else the executor knows of why it ended, e.g. "cancelled in Slurm from outside weft
  // (scancel)"; not a reason to fail the job.
  std::string cause;
  // "exit code 1", "killed by signal 9 (SIGKILL)", or killed_for when set; then the cause.
  std::string Describe() const;
};

class Executor {
 public:
  virtual ~Executor() = default;
  // Starts one learner. Returns its pid. Internal if the process cannot be created.
  virtual absl::StatusOr<int64_t> Start(const LearnerLaunch& launch) = 0;
  // Asks every learner of `job_id` to stop (SIGTERM), then kills what is left after `grace_ms`
  // milliseconds (SIGKILL); with grace_ms <= 0 kills at once. Returns at once; exits are
  // reported by Reap(). OK if none runs.
  virtual absl::Status Stop(const std::string& job_id, int64_t grace_ms) = 0;
  // Kills learner `rank` (LearnerLaunch::rank, the learner's id) of `job_id` at once (SIGKILL;
  // on Slurm scancel), leaving the others running: a hung member of an elastic job. Returns at
  // once; the exit is reported by Reap() like any other. NotFound if no such learner runs.
  virtual absl::Status Kill(const std::string& job_id, int rank) = 0;
  // Learners that ended since the last call, without blocking.
  virtual std::vector<LearnerExit> Reap() = 0;
  // Takes over a learner started by an earlier weftd that is still running (pid `pid`, for
  // `launch.job_id` and `launch.attempt`). NotFound if no such live learner exists.
  virtual absl::Status Adopt(const LearnerLaunch& launch, int64_t pid) = 0;
  // Number of learner processes of `job_id` that have not exited (reaped or not).
  virtual int Running(const std::string& job_id) = 0;
  // Number of learners of `job_id` whose exits Reap() has not reported yet: those running and
  // those that exited since. What a gang's outcome waits for, so that every exit of the attempt
  // is seen (a killed learner's may come a round after its peer's). Running() by default, for
  // an executor that counts a learner until Reap() reports it.
  virtual int Unreaped(const std::string& job_id) { return Running(job_id); }
  // A host:port where rank 0 of a gang placed on `node` can serve the job's rendezvous store
  // (c10d TCPStore) and the other ranks reach it. Unavailable if no port can be found.
  virtual absl::StatusOr<std::pair<std::string, int>> RendezvousAddress(
      const std::string& node) = 0;
  // Whether a gang placed on one node may train as one learner (JobSpec::LearnersAsOne): that
  // learner starts with the whole gang's threads and memory limit, so the executor must not hold
  // each process to one learner's share of the node. Only the local executor says yes (its
  // learners share their node's cpuset); a Slurm task is held to its --cpus-per-task.
  virtual bool TrainsGangsAsOneLearner() const { return false; }
  // Whether the executor chooses a learner's GPU devices itself (Slurm allocates them to the
  // learner's Slurm job): weftd then takes the devices a learner reports at registration as its
  // own. Otherwise the learner gets exactly the devices weftd's scheduler gave it.
  virtual bool ChoosesGpus() const { return false; }
  // The container runtime learners run in ("podman"), or "none" (unconfined), with a line for
  // weftd's log and GET /v1/nodes saying what it holds a learner to.
  virtual std::string Runtime() const { return "none"; }
  virtual std::string RuntimeDescription() const { return ""; }

  // From now on every Start is refused with `why` (Unavailable): `runtime`, the runtime the admin
  // chose, cannot run learners here. Call before any Start.
  void Refuse(absl::Status why, std::string runtime) {
    refusal_ = std::move(why);
    refused_runtime_ = std::move(runtime);
  }
  // OK when learners can be started; otherwise why not: weftd then refuses jobs with the reason.
  const absl::Status& Available() const { return refusal_; }

 protected:
  // The runtime Refuse named; empty when learners can be started.
  const std::string& refused_runtime() const { return refused_runtime_; }

 private:
  absl::Status refusal_;
  std::string refused_runtime_;
};

}  // namespace weft
