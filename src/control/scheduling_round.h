// One scheduling round: the cluster view's snapshot of the store's jobs goes to the policy
// (scheduler/policy.h), its decisions are checked (scheduler/decision_check.h: a round that
// assumes a preempted job's nodes free at once, or holds a job outside its range, is refused
// whole) and applied — preemptions (the learners checkpoint and exit; the job keeps its nodes
// until they have), resizes (in place for elastic jobs through ElasticMembership, else a
// restart from a checkpoint), then starts (AttemptStarter) — and why each queued job waits is
// published (JobRecorder::Waiting) and handed to the view.
//
// Thread-safety: none of its own. The controller's loop runs one round at a time, under its job
// lock, with the attempts that lock guards.
#pragma once

#include <string>
#include <vector>

#include "common/clock.h"
#include "control/attempt_starter.h"
#include "control/attempt_tracker.h"
#include "control/cluster_view.h"
#include "control/elastic_membership.h"
#include "control/job_recorder.h"
#include "executor/executor.h"
#include "scheduler/policy.h"

namespace weft {

class SchedulingRound {
 public:
  // The parts it drives: all borrowed, and they must outlive it. `stop_grace_ms`: how long a
  // preempted job's learners have to checkpoint before SIGKILL (ms).
  struct Parts {
    Executor& executor;
    scheduler::Policy& policy;
    JobRecorder& recorder;
    ClusterView& view;
    ElasticMembership& membership;
    AttemptStarter& starter;
    const Clock& clock;
    int64_t stop_grace_ms;
  };
  explicit SchedulingRound(Parts parts) : p_(parts) {}
  SchedulingRound(const SchedulingRound&) = delete;
  SchedulingRound& operator=(const SchedulingRound&) = delete;

  // One round over `jobs` (the store's active jobs as of this round). The policy runs only when
  // a job waits or a running elastic job could grow into idle capacity.
  void Run(AttemptTracker& attempts, const std::vector<JobRecord>& jobs);

 private:
  // RUNNING -> PREEMPTED (`reason` in its history) and SIGTERM to its learners, which checkpoint
  // and exit; the last exit moves the job back to QUEUED (LearnerExits). It keeps its nodes
  // until then.
  void Preempt(JobRecord r, const std::string& reason);
  // Applies a resize of a running job: in place for an elastic job (ElasticMembership::Grow,
  // Shrink), else as a restart from the checkpoint its learners write when stopped (it comes
  // back with what fits then): a shrink at once, a grow once the job is RUNNING (a starting gang
  // cannot checkpoint yet).
  void Resize(AttemptTracker& attempts, const JobRecord& r, const scheduler::Placement& p);

  Parts p_;
  std::string last_refusal_;  // the policy's latest refused round (logged once until it changes)
};

}  // namespace weft
