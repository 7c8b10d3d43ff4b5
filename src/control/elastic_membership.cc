// ElasticMembership: in-place membership changes of elastic jobs and the replacement of a
// parameter-server job's lost learner (control/elastic_membership.h).
#include "control/elastic_membership.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"

namespace weft {

bool ElasticMembership::InPlace(const JobRecord& r) {
  if (r.state != JobState::kRunning && r.state != JobState::kDelivered) return false;
  auto spec = c_.specs.Get(r);
  // A command job's program does not speak the regroup protocol: its changes are restarts.
  return spec.ok() && (*spec)->resources.elastic && !(*spec)->IsCommandJob();
}

bool ElasticMembership::Settling(const AttemptTracker& attempts, const std::string& id) {
  const AttemptTracker::Attempt* a = attempts.Find(id);
  return a != nullptr && (!a->untold.empty() || !a->joining.empty());
}

bool ElasticMembership::NextGeneration(AttemptTracker& attempts, JobRecord& r,
                                       std::vector<LearnerSlot> members, const std::string& what) {
  std::pair<std::string, int> rendezvous;
  if (members.size() > 1) {
    absl::StatusOr<std::pair<std::string, int>> address =
        c_.executor.RendezvousAddress(members[0].node);
    if (!address.ok()) {
      spdlog::warn("job {}: no rendezvous for a new generation ({}); restarting the gang", r.id,
                   address.status().message());
      return false;
    }
    rendezvous = *address;
  }
  const JobRecord before = r;
  r.SetLearners(std::move(members), c_.clock.NowMs());
  r.generation = std::max<int64_t>(r.generation, 1) + 1;
  const size_t n = r.learners.size();
  std::string why = absl::StrCat(
      "generation ", r.generation, ": ", what, "; ", n, " learner", n == 1 ? " goes" : "s go",
      " on without a restart (rank 0 is learner ", r.learners[0].id,
      n > 1 ? absl::StrCat(", rendezvous at ", rendezvous.first, ":", rendezvous.second)
            : std::string(),
      ")");
  if (absl::Status s = c_.recorder.Transition(r, r.state, why); !s.ok()) {
    spdlog::error("job {}: cannot record generation {}: {}", r.id, r.generation, s.message());
    r = before;
    return false;
  }
  AttemptTracker::Attempt& attempt = attempts.Of(r.id);
  attempt.rendezvous[r.generation] = rendezvous;
  attempt.generation = r.generation;
  attempt.untold.clear();
  for (const LearnerSlot& l : r.learners) {
    if (!attempt.joining.count(l.id)) attempt.untold.insert(l.id);
  }
  return true;
}

bool ElasticMembership::Regroup(AttemptTracker& attempts, JobRecord& r, int learner_id,
                                const std::string& reason) {
  if (!InPlace(r)) return false;
  auto spec = c_.specs.Get(r);
  std::vector<LearnerSlot> survivors;
  for (const LearnerSlot& l : r.learners) {
    if (l.id != learner_id) survivors.push_back(l);
  }
  if (survivors.size() == r.learners.size()) return true;  // not a member any more: settled
  const int min = std::max(1, (*spec)->resources.min_learners);
  if (static_cast<int>(survivors.size()) < min) return false;
  if (!NextGeneration(attempts, r, std::move(survivors), reason)) return false;
  AttemptTracker::Attempt& attempt = attempts.Of(r.id);
  attempt.last_seen_ms.erase(learner_id);
  attempt.registered.erase(learner_id);
  attempt.finished.erase(learner_id);
  attempt.joining.erase(learner_id);
  attempt.untold.erase(learner_id);
  attempt.silenced.erase(learner_id);
  return true;
}

bool ElasticMembership::ReplaceLearner(AttemptTracker& attempts, JobRecord& r, int learner_id,
                                       const std::string& reason) {
  if (r.state != JobState::kRunning && r.state != JobState::kDelivered) return false;
  auto spec = c_.specs.Get(r);
  if (!spec.ok() || !(*spec)->UsesParameterServer()) return false;
  auto slot = std::find_if(r.learners.begin(), r.learners.end(),
                           [learner_id](const LearnerSlot& l) { return l.id == learner_id; });
  if (slot == r.learners.end() || slot == r.learners.begin()) return false;
  AttemptTracker::Attempt& attempt = attempts.Of(r.id);
  if (attempt.replacements >= (*spec)->max_restarts) return false;
  absl::StatusOr<DatasetRecord> data = c_.launches.DataSet(r, **spec);
  if (!data.ok()) return false;
  // The learner environment names a rendezvous for every gang; a ps learner does not use it.
  absl::StatusOr<std::pair<std::string, int>> rendezvous =
      c_.executor.RendezvousAddress(r.learners[0].node);
  if (!rendezvous.ok()) return false;
  const int rank = static_cast<int>(slot - r.learners.begin());
  absl::StatusOr<int64_t> pid =
      c_.executor.Start(c_.launches.Learner(r, **spec, rank, *rendezvous, *data));
  if (!pid.ok()) {
    spdlog::warn("job {}: cannot replace learner {}: {}", r.id, learner_id, pid.status().message());
    return false;
  }
  const int64_t old_pid = slot->pid;
  slot->pid = *pid;
  attempt.replacements += 1;
  attempt.last_seen_ms[learner_id] = c_.clock.NowMs();
  attempt.registered.erase(learner_id);
  attempt.finished.erase(learner_id);
  const std::string why =
      absl::StrCat(reason, "; learner ", learner_id, " replaced (pid ", old_pid, " -> ", *pid,
                   ", replacement ", attempt.replacements, " of ", (*spec)->max_restarts,
                   "): it takes its parameter-server slot over, the others go on");
  if (absl::Status s = c_.recorder.Transition(r, r.state, why); !s.ok()) {
    spdlog::error("job {}: cannot record the replacement: {}", r.id, s.message());
  }
  return true;
}

bool ElasticMembership::Shrink(AttemptTracker& attempts, JobRecord r,
                               const scheduler::Placement& p) {
  if (!InPlace(r) || p.learner_nodes.empty()) return false;
  if (Settling(attempts, r.id)) return true;  // a later round shrinks
  // The placement keeps a prefix of the learners (the last ranks leave): rank 0 stays.
  if (p.learner_nodes.size() >= r.learners.size()) return false;
  for (size_t i = 0; i < p.learner_nodes.size(); ++i) {
    if (r.learners[i].node != p.learner_nodes[i]) return false;  // not a pure shrink
  }
  std::vector<LearnerSlot> kept(r.learners.begin(), r.learners.begin() + p.learner_nodes.size());
  std::vector<LearnerSlot> leaving(r.learners.begin() + p.learner_nodes.size(), r.learners.end());
  std::vector<int> ids;
  for (const LearnerSlot& l : leaving) ids.push_back(l.id);
  const std::string what =
      absl::StrCat(p.reason.empty() ? absl::StrCat("shrink to ", kept.size()) : p.reason,
                   "; learner", ids.size() == 1 ? " " : "s ", absl::StrJoin(ids, ", "), " leave",
                   ids.size() == 1 ? "s" : "", " at the next step boundary");
  if (!NextGeneration(attempts, r, std::move(kept), what)) return false;
  AttemptTracker::Attempt& attempt = attempts.Of(r.id);
  for (const LearnerSlot& l : leaving) {
    attempt.leaving[l.id] = {l, c_.clock.NowMs()};
    attempt.registered.erase(l.id);
    attempt.last_seen_ms.erase(
        l.id);  // not watched as a member; LearnerExits::CheckLiveness bounds it
  }
  return true;
}

bool ElasticMembership::Grow(AttemptTracker& attempts, JobRecord r, const scheduler::Placement& p) {
  if (!InPlace(r) || r.learners.empty()) return false;
  if (Settling(attempts, r.id)) return true;  // a later round grows
  auto spec = c_.specs.Get(r);
  absl::StatusOr<DatasetRecord> data = c_.launches.DataSet(r, **spec);
  if (!data.ok()) return false;  // the restart path reports it
  // The learners the placement adds to the job's current ones: their nodes, and the GPU
  // devices the round gave them (the current learners keep theirs: scheduler/devices.h).
  std::multiset<std::string> have;
  for (const LearnerSlot& l : r.learners) have.insert(l.node);
  std::vector<LearnerSlot> added;
  for (size_t i = 0; i < p.learner_nodes.size(); ++i) {
    const std::string& node = p.learner_nodes[i];
    if (auto it = have.find(node); it != have.end()) {
      have.erase(it);
    } else {
      added.push_back({node, 0, 0,
                       i < p.learner_gpus.size() ? p.learner_gpus[i] : std::vector<int>{},
                       c_.clock.NowMs()});
    }
  }
  if (added.empty() || !have.empty()) return false;  // not a pure grow
  absl::StatusOr<std::pair<std::string, int>> rendezvous =
      c_.executor.RendezvousAddress(r.learners[0].node);
  if (!rendezvous.ok()) return false;
  // Never a lost learner's id (next_learner_id is 0 in a record older than ids).
  for (const LearnerSlot& l : r.learners) r.next_learner_id = std::max(r.next_learner_id, l.id + 1);
  std::vector<int> joining;
  for (LearnerSlot& newcomer : added) {
    joining.push_back(r.next_learner_id);
    newcomer.id = r.next_learner_id++;
    r.learners.push_back(std::move(newcomer));
  }
  r.generation = std::max<int64_t>(r.generation, 1) + 1;
  std::string why = absl::StrCat(
      "generation ", r.generation, ": ", p.reason.empty() ? "grow" : p.reason, "; learner",
      joining.size() == 1 ? " " : "s ", absl::StrJoin(joining, ", "), " join",
      joining.size() == 1 ? "s" : "", " without a restart (", r.learners.size(),
      " learners, rendezvous at ", rendezvous->first, ":", rendezvous->second, ")");
  if (absl::Status s = c_.recorder.Transition(r, r.state, why); !s.ok()) {
    spdlog::error("job {}: cannot record generation {}: {}", r.id, r.generation, s.message());
    return true;  // nothing changed; a later round tries again
  }
  AttemptTracker::Attempt& attempt = attempts.Of(r.id);
  attempt.rendezvous[r.generation] = *rendezvous;
  attempt.generation = r.generation;
  attempt.joining.insert(joining.begin(), joining.end());
  // The running learners hear of it from their heartbeats once the newcomers are ready. Until each
  // has asked (Answer) the job is settling and takes no other resize: one decided sooner would
  // send them straight past this generation, whose newcomers would wait at its rendezvous for
  // peers that never come.
  for (size_t rank = 0; rank + joining.size() < r.learners.size(); ++rank) {
    attempt.untold.insert(r.learners[rank].id);
  }
  for (size_t rank = r.learners.size() - joining.size(); rank < r.learners.size(); ++rank) {
    LearnerLaunch launch =
        c_.launches.Learner(r, **spec, static_cast<int>(rank), *rendezvous, *data);
    launch.generation = r.generation;
    launch.generation_rank = static_cast<int>(rank);
    absl::StatusOr<int64_t> pid = c_.executor.Start(launch);
    if (!pid.ok()) {
      // The others would wait for it in vain: a generation without it.
      const int id = r.learners[rank].id;
      Regroup(attempts, r, id,
              absl::StrCat("cannot start learner ", id, ": ", pid.status().message()));
      return true;
    }
    r.learners[rank].pid = *pid;
    attempt.last_seen_ms[r.learners[rank].id] = c_.clock.NowMs();
  }
  if (absl::Status s = c_.store.UpdateJob(r); !s.ok()) {
    spdlog::error("job {}: cannot record learner pids: {}", r.id, s.message());
  }
  return true;
}

bool ElasticMembership::KillSilentMember(AttemptTracker& attempts, const JobRecord& r, int id,
                                         const std::string& silence) {
  // Only where its loss is a new generation: a running elastic job keeping its minimum.
  auto spec = c_.specs.Get(r);
  if (!InPlace(r) || !spec.ok() || r.learners.size() < 2 ||
      static_cast<int>(r.learners.size()) - 1 < std::max(1, (*spec)->resources.min_learners)) {
    return false;
  }
  AttemptTracker::Attempt& a = attempts.Of(r.id);
  const TimeMs now = c_.clock.NowMs();
  if (auto it = a.silenced.find(id); it != a.silenced.end()) {
    // Killed already: its exit is awaited, for a heartbeat timeout at most.
    return now - it->second.second <= c_.options.heartbeat_timeout_ms;
  }
  if (!c_.executor.Kill(r.id, id).ok()) return false;
  spdlog::warn("job {}: learner {} {}; killed, so that the others go on without it", r.id, id,
               silence);
  a.silenced[id] = {absl::StrCat(silence, ", so weftd killed it"), now};
  return true;
}

void ElasticMembership::ReleaseLeavers(AttemptTracker& attempts, const JobRecord& r, TimeMs now) {
  if (attempts.Find(r.id) == nullptr) return;
  auto& leaving = attempts.Of(r.id).leaving;
  for (auto it = leaving.begin(); it != leaving.end();) {
    if (now - it->second.second <= c_.options.heartbeat_timeout_ms) {
      ++it;
      continue;
    }
    // Killed, so that what it holds (its GPUs above all) is free when the scheduler says so.
    const absl::Status killed = c_.executor.Kill(r.id, it->first);
    spdlog::warn(
        "job {}: learner {} told to leave {} ms ago has not exited{}; its node {} counts as "
        "free again",
        r.id, it->first, now - it->second.second, killed.ok() ? ", so weftd killed it" : "",
        it->second.first.node);
    it = leaving.erase(it);
  }
}

absl::StatusOr<RegroupDecision> ElasticMembership::Answer(AttemptTracker& attempts,
                                                          const JobRecord& r, int learner_id,
                                                          int64_t generation, bool* undecided) {
  RegroupDecision d;
  AttemptTracker::Attempt& a = attempts.Of(r.id);
  if (a.failure) return d;  // kWait: the gang is stopping
  if (r.generation <= generation) {
    *undecided = true;  // kWait: no new generation yet
    return d;
  }
  auto member = std::find_if(r.learners.begin(), r.learners.end(),
                             [learner_id](const LearnerSlot& l) { return l.id == learner_id; });
  d.generation = r.generation;
  if (member == r.learners.end()) {
    d.kind = RegroupDecision::Kind::kStop;
    d.reason =
        absl::StrCat("learner ", learner_id, " is not a member of generation ", r.generation);
    return d;
  }
  a.last_seen_ms[learner_id] = c_.clock.NowMs();
  a.untold.erase(learner_id);
  a.joining.erase(learner_id);  // a newcomer asks once it is ready to join
  d.kind = RegroupDecision::Kind::kReform;
  d.rank = static_cast<int>(member - r.learners.begin());
  d.world_size = static_cast<int>(r.learners.size());
  if (d.world_size > 1) {
    auto it = a.rendezvous.find(r.generation);
    if (it == a.rendezvous.end()) {
      // Chosen before a weftd restart and lost with it: choose again, once for everyone.
      absl::StatusOr<std::pair<std::string, int>> address =
          c_.executor.RendezvousAddress(r.learners[0].node);
      if (!address.ok()) return absl::UnavailableError(address.status().message());
      it = a.rendezvous.emplace(r.generation, *address).first;
    }
    d.rendezvous_host = it->second.first;
    d.rendezvous_port = it->second.second;
  }
  return d;
}

int64_t ElasticMembership::Announced(const AttemptTracker& attempts, const std::string& id) {
  const AttemptTracker::Attempt* a = attempts.Find(id);
  if (a == nullptr) return 0;
  // A generation whose newcomers are still starting is announced once they are ready.
  return a->joining.empty() ? a->generation : a->generation - 1;
}

bool ElasticMembership::NewcomersStarting(const AttemptTracker& attempts, const std::string& id) {
  const AttemptTracker::Attempt* a = attempts.Find(id);
  return a != nullptr && !a->joining.empty();
}

}  // namespace weft
