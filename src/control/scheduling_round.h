// One scheduling round: the cluster view's snapshot of the store's jobs goes to the policy
// (scheduler/policy.h), its decisions are checked (scheduler/decision_check.h: a round that
// assumes a preempted job's nodes free at once, or holds a job outside its range, is refused
// whole), each learner it places given its GPU devices (scheduler/devices.h), and applied —
// preemptions (the learners checkpoint and exit; the job keeps its nodes
// until they have), resizes (in place for elastic jobs through ElasticMembership, else a
// restart from a checkpoint), then starts (AttemptStarter) — and why each queued job waits is
// published (JobRecorder::Waiting) and handed to the view.
//
// A round is decided in two halves so that learners' reports never wait behind the policy: Decide
// runs the policy without the controller's job lock, over the jobs and attempt facts read under
// it; Apply, under the lock again, applies the decisions only if none of the jobs they name has
// changed since (optimistic concurrency, as in Omega's shared-state schedulers: a round decided
// over a picture that moved is dropped whole and decided again by the next one).
//
// Thread-safety: one round at a time (the controller serialises them). Decide takes no lock of
// the controller's; Apply must be called under its job lock, with the attempts that lock guards.
#pragma once

#include <map>
#include <optional>
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
#include "store/store.h"

namespace weft {

class SchedulingRound {
 public:
  // The parts it drives: all borrowed, and they must outlive it. `stop_grace_ms`: how long a
  // preempted job's learners have to checkpoint before SIGKILL (ms).
  struct Parts {
    Store& store;
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

  // What a round needs of the attempts, copied under the job lock: each job's restart backoff
  // (unix ms) and the learners told to leave, who still hold their nodes and devices.
  struct Inputs {
    std::map<std::string, TimeMs> not_before;
    std::map<std::string, std::vector<LearnerSlot>> leaving;
  };
  static Inputs InputsOf(const AttemptTracker& attempts);

  // What a round decided, not yet applied.
  struct Plan {
    std::vector<JobRecord> jobs;  // the store's active jobs the round was decided over
    ClusterView::Round round;
    std::map<std::string, scheduler::Waiting> waiting;  // why each queued job waits
    // The policy's checked decisions; none when nothing was due or the round was refused.
    std::optional<scheduler::Decisions> decisions;
  };
  // Decides a round over `jobs` (the store's active jobs as of this round) without any lock of
  // the controller's. The policy runs only when a job waits or a running elastic job could grow
  // into idle capacity.
  Plan Decide(Inputs inputs, std::vector<JobRecord> jobs);
  // Publishes the plan's waiting reasons and applies its decisions — if every job they name is
  // still as the plan read it (state, attempt, generation, learners and servers, re-read from the
  // store); otherwise none of them, and the next round decides again. Under the job lock.
  void Apply(AttemptTracker& attempts, Plan plan);

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
  // Re-reads every job `d` names into `plan.round.jobs`; false (logged) if one is gone or holds
  // other learners, or is in another state or attempt, than when the plan read it.
  bool StillAsPlanned(const scheduler::Decisions& d, ClusterView::Round& round);

  Parts p_;
  std::string last_refusal_;  // the policy's latest refused round (logged once until it changes)
};

}  // namespace weft
