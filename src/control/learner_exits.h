// How learner exits and silences become the outcome of an attempt: rank 0's clean exit after
// its success completes the job; another rank's clean exit waits for rank 0; a lost learner of
// an elastic or parameter-server job is a new generation or a replacement (ElasticMembership);
// any other failure stops the rest of the gang (rank 0 checkpoints the last complete step) and
// then restarts the job from its latest checkpoint with exponential backoff, up to
// max_restarts, or fails it; a user error (a bad spec, missing data, a learner killed for going
// over its limits) fails it at once. A learner silent past its timeout is treated as lost.
//
// Thread-safety: none of its own. The controller calls it under its job lock with the attempts
// that lock guards (control/attempt_tracker.h); every outcome is stored through the
// JobRecorder.
#pragma once

#include <string>
#include <vector>

#include "common/clock.h"
#include "control/attempt_tracker.h"
#include "control/control_context.h"
#include "control/elastic_membership.h"

namespace weft {

class LearnerExits {
 public:
  // Both are borrowed and must outlive it. From c.options: stop_grace_ms, the restart backoff,
  // start_timeout_ms and heartbeat_timeout_ms.
  LearnerExits(const ControlContext& c, ElasticMembership& membership)
      : c_(c), membership_(membership) {}
  LearnerExits(const LearnerExits&) = delete;
  LearnerExits& operator=(const LearnerExits&) = delete;

  // Settles one learner's exit (reaped by the executor). False when the job cannot be read from
  // the store: the caller keeps the exit and settles it in a later round, in order.
  bool Settle(AttemptTracker& attempts, const LearnerExit& exit);
  // Stops the learners of jobs in `jobs` silent too long (start_timeout_ms while STARTING,
  // heartbeat_timeout_ms after) and ends those attempts; updates their records in `jobs`.
  void CheckLiveness(AttemptTracker& attempts, std::vector<JobRecord>& jobs);

  // Training of `r` ended with its success (`reason`): COMPLETED if its final model is
  // committed, else FAILED saying so; the attempt is forgotten and any learner left stopped.
  void Complete(AttemptTracker& attempts, JobRecord& r, const std::string& reason);
  // After a retryable failure (`reason`): requeues `r` (resuming from its latest checkpoint)
  // after a backoff of restart_backoff_ms doubled per restart (at most restart_backoff_max_ms)
  // while restarts < max_restarts; otherwise fails it.
  void RestartOrFail(AttemptTracker& attempts, JobRecord& r, const std::string& reason);
  // The attempt of `r` cannot go on (`reason`): its learners are killed at once, without a
  // checkpoint, and the job restarts from its latest one, or fails once out of restarts.
  void AbandonAttempt(AttemptTracker& attempts, JobRecord& r, const std::string& reason);

 private:
  void SettlePreempted(AttemptTracker& attempts, JobRecord& r, const LearnerExit& e);
  // A learner of the current attempt failed, or exited without its success (`finished_reason`:
  // what it said when it finished, if it did): a replacement or a new generation when the job
  // allows one, else the rest of the gang is stopped (rank 0 checkpoints) and the attempt ends.
  void SettleLoss(AttemptTracker& attempts, JobRecord& r, const LearnerExit& e,
                  const std::string& finished_reason);
  void SettleFailingGang(AttemptTracker& attempts, JobRecord& r, const LearnerExit& e);
  // The learners of the current attempt are all gone: forget the attempt, then fail the job
  // (`fail_job`) or restart it.
  void EndAttempt(AttemptTracker& attempts, JobRecord& r, const std::string& reason, bool fail_job);

  const ControlContext& c_;
  ElasticMembership& membership_;
};

}  // namespace weft
