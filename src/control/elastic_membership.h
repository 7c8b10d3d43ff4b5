// In-place membership changes of elastic jobs (issue 14), in the spirit of TorchElastic's
// rendezvous rounds and Horovod's elastic driver, but decided by weftd: when a learner of a
// running elastic job is lost and at least its minimum remain, the survivors are not stopped —
// the job moves to a new generation without that learner (ranks renumbered in order, ids
// kept), recorded in its history, and the survivors' Regroup calls are answered with their new
// rank, the world size and where the new generation's group meets (served by its rank 0). A
// grow starts newcomers that join a new generation; a shrink makes one without the last ranks,
// who are told to stop when they ask. A parameter-server job's lost learner (not rank 0) is
// replaced alone, in the same attempt.
//
// Thread-safety: none of its own. The controller calls it under its job lock and hands it the
// attempts that lock guards (control/attempt_tracker.h); every change is stored through the
// JobRecorder before the attempt is pointed at it.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "control/attempt_tracker.h"
#include "control/control_context.h"
#include "control/learner_events.h"
#include "scheduler/policy.h"

namespace weft {

class ElasticMembership {
 public:
  // `c` is borrowed and must outlive it. From c.options: heartbeat_timeout_ms, how long a learner
  // killed for its silence, or told to leave by a shrink, may take to exit (ms).
  explicit ElasticMembership(const ControlContext& c) : c_(c) {}
  ElasticMembership(const ElasticMembership&) = delete;
  ElasticMembership& operator=(const ElasticMembership&) = delete;

  // Whether `r`'s membership can change without a restart: a running elastic job of the built-in
  // learner (a command job's program does not speak the regroup protocol).
  bool InPlace(const JobRecord& r);

  // Learner `learner_id` of `r` is lost (`reason`). For a running elastic job with at least its
  // minimum left, moves it to a new generation without that learner (stored with a history
  // entry; survivors learn it through Answer) and returns true; a learner no longer a member is
  // settled (true). False when the job must stop its gang instead (not elastic, not running,
  // below its minimum, no rendezvous, the store refused).
  bool Regroup(AttemptTracker& attempts, JobRecord& r, int learner_id, const std::string& reason);
  // Learner `learner_id` of `r`, a running parameter-server job, is lost (`reason`) and is not
  // rank 0 (whose process holds the server): starts a new learner in its place, on its node, in
  // the same attempt (recorded in the history); it takes the slot over and goes on from the
  // slot's position, and the other learners never stop. True when started; false when the job
  // must stop its gang instead (not ps, rank 0, not running, max_restarts replacements already
  // in this attempt, the executor or the store refused).
  bool ReplaceLearner(AttemptTracker& attempts, JobRecord& r, int learner_id,
                      const std::string& reason);
  // A grow of a running elastic job (`p`: its current nodes and the ones it grows into): starts
  // the new learners as members of a new generation (recorded in the history) and leaves the
  // running ones to join it at their next step. True also when it waits (survivors of a loss not
  // all told their generation yet, a newcomer not ready yet: a later round grows), or when the
  // store refused the change. False when it cannot be done in place (a command job, not running,
  // not a pure grow, no rendezvous): the caller restarts the job instead.
  bool Grow(AttemptTracker& attempts, JobRecord r, const scheduler::Placement& p);
  // A shrink of a running elastic job (`p`: the nodes it keeps, a prefix of its learners'): moves
  // it to a new generation without the learners on the other nodes (recorded in the history);
  // they learn it at their next heartbeat, leave with the rest at the same step boundary, and
  // hold their nodes until they exit (at most a heartbeat timeout: ReleaseLeavers). True also
  // when it waits (a membership change still settling); false when it cannot be done in place
  // (a command job, not running, not a pure shrink, no rendezvous, the store refused): the
  // caller restarts the job instead.
  bool Shrink(AttemptTracker& attempts, JobRecord r, const scheduler::Placement& p);
  // Stores `r` as a new generation whose members are `members` (rank order), with a history
  // entry "generation G: <what>; N learners go on without a restart (rank 0 is learner X,
  // rendezvous at H:P)", and points the attempt at it (its rendezvous, members to tell). False,
  // `r` unchanged, when there is no rendezvous or the store refused.
  bool NextGeneration(AttemptTracker& attempts, JobRecord& r, std::vector<LearnerSlot> members,
                      const std::string& what);

  // The answer to learner `learner_id` of `r` (its current attempt, as stored) asking to regroup
  // after `generation`: kWait while the gang is stopping or no later generation is decided (then
  // *undecided is set: a round should reap the exit it saw); kStop when it is not a member of
  // the new one; else kReform with its rank, the world size and the rendezvous. Unavailable
  // when a rendezvous lost with a weftd restart cannot be chosen again.
  absl::StatusOr<RegroupDecision> Answer(AttemptTracker& attempts, const JobRecord& r,
                                         int learner_id, int64_t generation, bool* undecided);
  // The generation heartbeats announce for job `id`: the current one once its newcomers are
  // ready, the one before while they start (the running learners keep training meanwhile).
  static int64_t Announced(const AttemptTracker& attempts, const std::string& id);
  // Whether job `id` has newcomers still starting.
  static bool NewcomersStarting(const AttemptTracker& attempts, const std::string& id);

  // A member of a running elastic job (`r`, learner `id`) silent past the heartbeat timeout is
  // killed, so that its loss is a new generation rather than a restart of the gang (`silence`
  // says how long, for its exit's reason); true while that is under way (the kill is asked, its
  // exit awaited for a heartbeat timeout), false when the gang has to stop (not such a job,
  // below its minimum without it, or no exit came).
  bool KillSilentMember(AttemptTracker& attempts, const JobRecord& r, int id,
                        const std::string& silence);
  // Learners of `r` told to leave by a shrink more than a heartbeat timeout before `now` (unix
  // ms) are killed and no longer hold their nodes and devices: a learner that hangs instead of
  // leaving does not keep them forever, nor share a GPU with the learner given it next.
  void ReleaseLeavers(AttemptTracker& attempts, const JobRecord& r, TimeMs now);

 private:
  // Whether job `id`'s last membership change is still settling: members not yet told their
  // generation (after a loss or a shrink) or newcomers not yet ready. Survivors re-form and a
  // newcomer joins before the next change starts.
  static bool Settling(const AttemptTracker& attempts, const std::string& id);

  const ControlContext& c_;
};

}  // namespace weft
