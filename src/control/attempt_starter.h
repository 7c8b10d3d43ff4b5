// Starting a job's next attempt on the nodes a round placed it on: the gang is laid out
// (learners first over the nodes, then a scale-out parameter-server job's servers, one of each
// in turn), the job moves QUEUED -> PLACED -> STARTING with the placement and the rendezvous in
// its history, what an earlier attempt left uncommitted in its checkpoint directory is removed,
// and the servers then the learners are started — all or nothing: a gang missing a learner or
// a server cannot train, so one that cannot start is stopped whole and the job fails (a
// missing data set or image) or restarts (no port for its rendezvous).
//
// Thread-safety: none of its own. The controller's round calls it under the job lock with the
// attempts that lock guards.
#pragma once

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "control/attempt_tracker.h"
#include "control/control_context.h"
#include "control/learner_exits.h"
#include "scheduler/policy.h"

namespace weft {

class AttemptStarter {
 public:
  // Both are borrowed and must outlive it.
  AttemptStarter(const ControlContext& c, LearnerExits& exits) : c_(c), exits_(exits) {}
  AttemptStarter(const AttemptStarter&) = delete;
  AttemptStarter& operator=(const AttemptStarter&) = delete;

  // Starts the next attempt of `r`, a QUEUED job (any other is left alone), on the nodes of
  // `placement`, as described above. Store errors leave the job for the next round.
  void Start(AttemptTracker& attempts, JobRecord r, const scheduler::Placement& placement);

 private:
  // Where the gang's rank 0 serves its rendezvous (a gang of more than one learner) and where
  // each parameter server listens (r.servers' addresses). Unavailable when a port cannot be had.
  absl::Status PickAddresses(JobRecord& r, std::pair<std::string, int>* rendezvous);
  // Starts r.servers (their addresses chosen already) before the learners, who are told them.
  // Returns why not; the caller stops the gang.
  absl::Status StartServers(JobRecord& r, const JobSpec& spec, const DatasetRecord& data);
  // Removes the files in the job's checkpoint directory that the store does not hold: what a
  // learner killed between writing a checkpoint and committing it left behind (a temporary
  // file, or a whole checkpoint never registered). Called only while none of the job's learners
  // runs.
  void RemoveUncommittedCheckpoints(const std::string& id);

  const ControlContext& c_;
  LearnerExits& exits_;
};

}  // namespace weft
