// What learners report to weftd, as the controller receives it from the coordination service
// (control/coordinator_service.h). Every call names the job, the learner's rank and the attempt
// it was started for; a call from an attempt that is not the job's current one is refused, so
// two copies of one learner never both count.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "job/job.h"

namespace weft {

// Result of a learner registering.
struct RegisterDecision {
  bool accepted = false;
  std::string reason;                    // why not, when refused
  std::vector<std::string> resume_from;  // committed checkpoints, newest first
  // Neither accepted nor refused: the store could not be reached (reason says why); the learner
  // calls again.
  bool retry = false;
};

// What weftd answers a learner of an elastic job that lost a peer (OnRegroup).
struct RegroupDecision {
  enum class Kind {
    kWait,    // the new membership is not settled yet: ask again
    kReform,  // join `generation` as `rank` of `world_size` at the rendezvous
    kStop,    // not a member any more, or the job moved on (`reason`)
  };
  Kind kind = Kind::kWait;
  int64_t generation = 0;
  int rank = 0;
  int world_size = 0;
  std::string rendezvous_host;
  int rendezvous_port = 0;
  std::string reason;
};

// What a heartbeat or a metrics report gets back.
enum class ReportAnswer {
  kKeepRunning,
  kStop,   // the job no longer runs this attempt (halted, deleted, moved on)
  kRetry,  // not taken: the store could not be reached; the learner keeps it and sends it again
};

class LearnerEvents {
 public:
  virtual ~LearnerEvents() = default;

  // A learner of `world_size` (0: not given) starts, handed the GPU devices `gpus` (host
  // indices). Refused for a stale attempt, a job that is not running, a rank outside the job's
  // world size or a world size that is not the job's. GPUs other than the ones weftd placed it
  // on end the attempt (its learners are killed; it restarts or fails with that reason) —
  // unless the executor chooses the devices itself (Executor::ChoosesGpus, Slurm): then they
  // are recorded as the learner's. The job moves STARTING -> RUNNING once all of its learners
  // have registered.
  virtual RegisterDecision OnRegister(const std::string& id, int rank, int64_t attempt, int64_t pid,
                                      int world_size, const std::vector<int>& gpus) = 0;
  // Every rank heartbeats (each is watched for silence); only rank 0's progress and metrics are
  // the job's. kRetry while the store cannot be reached (nothing of the report was stored).
  virtual ReportAnswer OnHeartbeat(const std::string& id, int rank, int64_t attempt,
                                   const JobProgress& progress) = 0;
  virtual ReportAnswer OnMetrics(const std::string& id, int rank, int64_t attempt,
                                 const std::vector<MetricRecord>& points,
                                 const JobProgress& progress) = 0;
  // The calls below answer Unavailable while the store cannot be reached: nothing was taken, and
  // the learner calls again.
  //
  // A model made durable. FailedPrecondition if the attempt is stale or the job is not running;
  // InvalidArgument for an unknown kind, a path that is not the one weftd derives for it
  // (job/layout.h), or a file that is missing or not `model.bytes` long.
  virtual absl::Status OnCommitModel(const std::string& id, int64_t attempt,
                                     const ModelRecord& model) = 0;
  // A checkpoint made durable; those beyond the spec's checkpoint.keep are deleted. Accepted
  // from the current attempt while the job runs or was just halted or preempted (its learner
  // writes one last checkpoint). FailedPrecondition for a stale attempt or another state;
  // InvalidArgument for a path that is not the one weftd derives for `checkpoint.step`, or a
  // file that is missing or not `checkpoint.bytes` long.
  virtual absl::Status OnCommitCheckpoint(const std::string& id, int64_t attempt,
                                          const CheckpointRecord& checkpoint) = 0;
  // A learner's own account of how it ended; rank 0's success is the job's. OK also when it is
  // ignored (a stale attempt).
  virtual absl::Status OnFinished(const std::string& id, int rank, int64_t attempt, bool succeeded,
                                  const std::string& reason) = 0;
  // Learner `learner_id` (its rank when the attempt started) lost a peer of `generation`'s group
  // and asks where to go: kReform once weftd has moved the job to a later generation that keeps
  // it, kStop if that generation leaves it out or the attempt is over, kWait until then.
  // Unavailable when the store cannot be reached (the learner asks again).
  virtual absl::StatusOr<RegroupDecision> OnRegroup(const std::string& id, int learner_id,
                                                    int64_t attempt, int64_t generation) = 0;
  // The current membership generation of job `id`'s attempt, as heartbeat answers tell its
  // learners (a later one than theirs: re-form at the next step); 0 when unknown.
  virtual int64_t Generation(const std::string& id) = 0;
  // Whether job `id`'s attempt has newcomers still starting (a grow announced to them but not
  // yet to their peers): heartbeat answers then ask for the next one sooner.
  virtual bool NewcomersStarting(const std::string& id) = 0;
};

}  // namespace weft
