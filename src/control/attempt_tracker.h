// What weftd knows about each job's current attempt that the store does not keep: which ranks
// have registered, when each was last heard from, how each said it finished, and why the gang is
// failing while its survivors checkpoint and stop; and, between attempts, the restart backoff.
// All of it is lost on a weftd restart by design: Recover() rebuilds what matters (adopted
// learners count as registered and just seen).
//
// Thread-safety: none; the controller owns it under its lock.
#pragma once

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "job/job.h"

namespace weft {

class AttemptTracker {
 public:
  // A learner's own account of how it ended (ReportFinished).
  struct Finish {
    bool succeeded = false;
    std::string reason;
  };
  // Why a gang's learner failed, kept while the rest of the gang checkpoints and stops.
  struct Failure {
    std::string reason;
    bool fail_job = false;  // fail the job instead of restarting it
    // The reason is an executor's account of an outside cause (LearnerExit::cause), which a
    // later exit of the gang does not replace.
    bool from_cause = false;
    // The reason is a learner's own exit (a code, or SIGPIPE from writing to a lost peer):
    // possibly a peer's that stopped because another learner was killed whose exit comes later
    // (in a container, the engine reports it after the peer's). A learner killed by a signal the
    // executor did not send — before `kill_at_ms`, when the executor's own SIGKILL is due — is
    // the cause and replaces it.
    bool from_exit = false;
    TimeMs kill_at_ms = 0;  // the survivors' stop grace ends (Executor::Stop)
  };
  // Learners are known by their id (LearnerSlot::id: their rank when the attempt started).
  struct Attempt {
    std::set<int> registered;            // ids
    std::map<int, TimeMs> last_seen_ms;  // by id; a learner that exited cleanly is dropped
    std::map<int, Finish> finished;      // by id
    std::optional<Failure> failure;
    // Where each generation after the first re-forms its group (host, port): chosen once per
    // generation, so every member is sent to the same one.
    std::map<int64_t, std::pair<std::string, int>> rendezvous;
    int64_t generation = 0;  // the job's, as last stored (JobRecord::generation)
    // Members of the current generation not yet told it by a Regroup answer, after a loss: the
    // job grows only once they all have, so survivors re-form without waiting for a newcomer.
    std::set<int> untold;
    // Newcomers of the current generation not ready yet (they ask Regroup once their data and
    // model are loaded): until then heartbeats announce the generation before, so the running
    // learners keep training instead of waiting for them.
    std::set<int> joining;
    // Learners a shrink told to leave (by id: the learner as it was, and when): not members any
    // more, they hold their node and devices until they exit at their next step boundary, so no
    // job is placed beside them.
    std::map<int, std::pair<LearnerSlot, TimeMs>> leaving;
    // Members of an elastic job that weftd killed for their silence (by id): why, and when. Their
    // exit is a loss like any other, with this reason; a kill that brings no exit within a
    // heartbeat timeout stops the gang.
    std::map<int, std::pair<std::string, TimeMs>> silenced;
    // Learners of a parameter-server job replaced alone in this attempt (at most max_restarts).
    int replacements = 0;
  };

  // The current attempt of `id`, created empty on first use.
  Attempt& Of(const std::string& id) { return attempts_[id]; }
  // The current attempt of `id`, or nullptr if nothing is known about it.
  const Attempt* Find(const std::string& id) const;
  // Forgets the current attempt (its learners are gone or being replaced).
  void EndAttempt(const std::string& id) { attempts_.erase(id); }

  // The job may not start again before `when` (unix ms).
  void SetNotBefore(const std::string& id, TimeMs when) { not_before_ms_[id] = when; }
  // Every job in a restart backoff, with when it may start again (unix ms).
  const std::map<std::string, TimeMs>& not_before() const { return not_before_ms_; }

  // Counts every learner still watched as heard from at `now_ms`: after the store could not be
  // reached, when learners' reports were turned away (so their silence was weftd's doing).
  void HeardFromAllAt(TimeMs now_ms) {
    for (auto& [id, attempt] : attempts_) {
      for (auto& [rank, seen] : attempt.last_seen_ms) seen = std::max(seen, now_ms);
    }
  }

  // The learners leaving after a shrink, who still hold their nodes and devices, by job id.
  std::map<std::string, std::vector<LearnerSlot>> Leavers() const;

  // Forgets everything about `id` (it was deleted).
  void Erase(const std::string& id);

 private:
  std::map<std::string, Attempt> attempts_;
  std::map<std::string, TimeMs> not_before_ms_;
};

}  // namespace weft
