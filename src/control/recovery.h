// After a weftd restart the store is the truth, and learners may have outlived the previous
// weftd. Recovery brings each active job in line with what still runs: a gang is adopted whole
// or not at all (Executor::Adopt) — except that an elastic job goes on in place without the
// learners that died meanwhile, if at least its minimum survive (a new generation); a job whose
// learners are gone is requeued to resume from its latest checkpoint (attempt fencing keeps
// stragglers out), unless its final model of this attempt is committed, which completes it. A
// preempted job's adopted learners are told again to checkpoint and stop, and what deletes cut
// short left on disk is removed.
//
// Thread-safety: none of its own. The controller runs it once, at start, under its job lock,
// with the attempts that lock guards.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "control/attempt_tracker.h"
#include "control/control_context.h"
#include "control/elastic_membership.h"
#include "control/learner_exits.h"

namespace weft {

class Recovery {
 public:
  // All are borrowed and must outlive it.
  Recovery(const ControlContext& c, ElasticMembership& membership, LearnerExits& exits)
      : c_(c), membership_(membership), exits_(exits) {}
  Recovery(const Recovery&) = delete;
  Recovery& operator=(const Recovery&) = delete;

  // Recovers every active job of the store (see above); adopted learners count as registered
  // and just heard from in `attempts`. Needs the coordinator at the same address as before for
  // adopted learners to reconnect. Errors from the store (a job not requeued stays as it was).
  absl::Status Recover(AttemptTracker& attempts);

 private:
  // Adopts the whole gang of `r` or none; true if adopted. An elastic job that can change in
  // place (ElasticMembership::InPlace) is adopted without the learners that died while no weftd
  // watched, as a new generation of the survivors, if at least its minimum survive.
  bool AdoptGang(AttemptTracker& attempts, JobRecord& r);
  bool AdoptSurvivors(AttemptTracker& attempts, JobRecord& r, const JobSpec& spec);
  // For a RUNNING or DELIVERED job whose learners are gone: true, with the completion's reason in
  // *reason, when its final model is committed, i.e. training had ended and only the previous
  // weftd's reaping of the exits (which held rank 0's ReportFinished in memory) was lost.
  bool FinishedUnseen(const JobRecord& r, std::string* reason);
  // Removes what deletes could not of the files of jobs the store no longer has
  // (JobLayout::DeletedDir).
  void RemoveDeletedJobsFiles();

  const ControlContext& c_;
  ElasticMembership& membership_;
  LearnerExits& exits_;
};

}  // namespace weft
