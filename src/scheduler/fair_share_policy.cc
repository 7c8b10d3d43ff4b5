#include "scheduler/fair_share_policy.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "scheduler/placement.h"
#include "scheduler/shares.h"

namespace weft::scheduler {
namespace {

std::string Num(double v) { return absl::StrFormat("%g", v); }

// Which resource of `quota` the gang would overrun, as "cpus 4/4", or "" if it fits.
std::string QuotaOverrun(const Resources& used, const Resources& gang, const Resources& quota) {
  Resources after = used;
  after += gang;
  if (after.cpus > quota.cpus + 1e-9) {
    return absl::StrCat("cpus ", Num(used.cpus), "/", Num(quota.cpus));
  }
  if (after.memory_mb > quota.memory_mb) {
    return absl::StrCat("memory ", used.memory_mb, "/", quota.memory_mb, " MiB");
  }
  if (after.gpus > quota.gpus) return absl::StrCat("gpus ", used.gpus, "/", quota.gpus);
  return "";
}

bool Elastic(const JobRequest& j) { return j.max_learners > j.min_learners; }

// The learners a waiting job starts with: its gang, or an elastic job's minimum.
int StartSize(const JobRequest& j) { return Elastic(j) ? j.min_learners : j.learners; }

Resources Gang(const JobRequest& j) { return j.per_learner.Times(StartSize(j)); }

// "2 learners" or, for an elastic job, "2 learners (elastic, 2 to 4)".
std::string LearnersOf(const JobRequest& j) {
  std::string s = absl::StrCat(StartSize(j), StartSize(j) == 1 ? " learner" : " learners");
  if (Elastic(j)) absl::StrAppend(&s, " (elastic, ", j.min_learners, " to ", j.max_learners, ")");
  return s;
}

// One tenant during a round: its figures (`used` grows as the round starts its jobs), its
// waiting jobs in the order it wants them, and what it has left waiting so far.
struct TenantRound {
  TenantShares figures;
  std::vector<size_t> waiting;  // job indices, priority then submission order
  size_t next = 0;              // next waiting job to consider
  int left_higher = 0, left_in_group = 0, group_priority = 0;
  bool any_group = false;

  double weight() const { return figures.share.weight > 0 ? figures.share.weight : 1; }
  // Counts a job of `priority` left waiting; returns how many of higher priority were left
  // waiting before it (waiting is in priority order).
  int LeaveWaiting(int priority) {
    if (!any_group || priority != group_priority) {
      left_higher += left_in_group;
      left_in_group = 0;
      group_priority = priority;
      any_group = true;
    }
    ++left_in_group;
    return left_higher;
  }
};

// One scheduling round in phases: progressive filling with reservations, then preemption for
// the first gang that did not fit.
class Round {
 public:
  explicit Round(const ClusterSnapshot& s);
  Decisions Run();

 private:
  TenantRound* NextTenant();
  void Consider(TenantRound& t, size_t i);
  void LeaveWaiting(TenantRound& t, size_t i);
  void Reserve(const JobRequest& j);
  void Explain(size_t i, WaitCode code, std::string reason);
  void PreemptFor(size_t blocked);
  std::vector<size_t> Victims(const JobRequest& b, bool shrink) const;
  std::vector<Node> RoomWithoutVictims() const;
  void MakeRoom(const JobRequest& b, const std::vector<std::pair<size_t, int>>& kept);
  void Grow();
  std::string ShrinkReason(const JobRequest& victim, const JobRequest& b) const;
  std::map<std::string, std::vector<size_t>> ElasticByTenant() const;

  const ClusterSnapshot& s_;
  const std::vector<JobRequest>& jobs_;
  const Resources total_;
  std::map<std::string, TenantRound> tenants_;
  FreeMap free_;
  Decisions d_;
  int blocked_ = -1;          // the first gang that did not fit; nodes are reserved for it
  bool making_room_ = false;  // this round shrinks or preempts jobs for the blocked one
};

Round::Round(const ClusterSnapshot& s)
    : s_(s), jobs_(s.jobs), total_(TotalCapacity(s.nodes)), free_(s.nodes) {
  std::map<std::string, TenantShares> shares = ComputeTenantShares(s);
  for (size_t i = 0; i < jobs_.size(); ++i) {
    const JobRequest& j = jobs_[i];
    TenantRound& t = tenants_[j.tenant];
    t.figures = shares[j.tenant];
    if (j.Waiting()) t.waiting.push_back(i);
    free_.Take(j);
  }
  for (auto& [name, t] : tenants_) {
    std::stable_sort(t.waiting.begin(), t.waiting.end(),
                     [&](size_t a, size_t b) { return jobs_[a].priority > jobs_[b].priority; });
  }
}

Decisions Round::Run() {
  // Progressive filling: the tenant with the smallest weighted dominant share goes next.
  while (TenantRound* t = NextTenant()) Consider(*t, t->waiting[t->next++]);
  if (blocked_ >= 0) PreemptFor(static_cast<size_t>(blocked_));
  // Room being made for a blocked job is not handed to elastic jobs in the same round.
  if (d_.preempted.empty() && !making_room_) Grow();
  return std::move(d_);
}

TenantRound* Round::NextTenant() {
  TenantRound* pick = nullptr;
  double best = 0;
  for (auto& [name, t] : tenants_) {
    if (t.next >= t.waiting.size()) continue;
    double s = DominantShare(t.figures.used, total_, t.weight());
    if (pick == nullptr || s < best) {
      pick = &t;
      best = s;
    }
  }
  return pick;
}

void Round::Explain(size_t i, WaitCode code, std::string reason) {
  if (s_.explain) d_.waiting.push_back({jobs_[i].job_id, code, std::move(reason)});
}

void Round::Consider(TenantRound& t, size_t i) {
  const JobRequest& j = jobs_[i];
  if (t.figures.share.has_quota) {
    std::string over = QuotaOverrun(t.figures.used, Gang(j), t.figures.share.quota);
    if (!over.empty())
      return Explain(i, WaitCode::kQuota, absl::StrCat("waiting: tenant quota ", over));
  }
  Placement p;
  p.job_id = j.job_id;
  const int n = StartSize(j);
  if (free_.TotalFree().Fits(Gang(j)) &&
      (j.spread ? free_.PlaceSpread(n, j.per_learner, &p.learner_nodes)
                : free_.PlacePacked(n, j.per_learner, {}, &p.learner_nodes, j.one_node))) {
    t.figures.used += Gang(j);
    d_.placements.push_back(std::move(p));
    return;
  }
  LeaveWaiting(t, i);
}

void Round::LeaveWaiting(TenantRound& t, size_t i) {
  const JobRequest& j = jobs_[i];
  const int ahead = t.LeaveWaiting(j.priority);
  if (ahead > 0) {
    if (blocked_ < 0) {
      Reserve(j);
      blocked_ = static_cast<int>(i);
    }
    return Explain(
        i, WaitCode::kPriority,
        absl::StrCat("waiting: behind ", ahead, " higher-priority ", ahead == 1 ? "job" : "jobs"));
  }
  std::string why = absl::StrCat(
      "waiting: no node set fits ", LearnersOf(j), " × ", Num(j.per_learner.cpus), " cpus",
      j.per_learner.gpus ? absl::StrCat(", ", j.per_learner.gpus, " gpus") : "", " (",
      j.spread     ? "spread"
      : j.one_node ? "one node"
                   : "pack",
      ")");
  if (blocked_ < 0) {
    Reserve(j);
    blocked_ = static_cast<int>(i);
    return Explain(i, WaitCode::kNoRoom, why + ", nodes reserved for it");
  }
  Explain(i, WaitCode::kReservation,
          absl::StrCat(why, " outside the nodes reserved for ", NameFor(j, jobs_[blocked_])));
}

// EASY backfilling's reservation (Lifka 1995, without runtime estimates): the nodes this gang
// will use once they drain, by capacity, not free room, preferring the nodes with most room now.
// Later jobs may only backfill elsewhere.
void Round::Reserve(const JobRequest& j) {
  std::vector<std::pair<int, int>> by_room;  // (-room now, index)
  for (size_t n = 0; n < s_.nodes.size(); ++n) {
    by_room.emplace_back(-LearnerSlots(free_.free()[n], j.per_learner, StartSize(j)),
                         static_cast<int>(n));
  }
  std::sort(by_room.begin(), by_room.end());
  int need = StartSize(j);
  for (auto [neg_room, n] : by_room) {
    if (need <= 0) break;
    int cap = LearnerSlots(s_.nodes[n].capacity, j.per_learner, need);
    if (cap <= 0) continue;
    free_.Reserve(n);
    need -= j.spread ? 1 : cap;
  }
}

// Running jobs the blocked gang may shrink to their minimum (`shrink` true: every elastic job
// above it, whose learners above it came from idle capacity; PreemptFor keeps shrinks between
// tenants towards fairness) or preempt whole (`shrink` false: lower-priority jobs of its own
// tenant, and jobs of tenants above their fair share while its tenant is below its own, only
// towards fairness), cheapest first (lowest priority, then youngest: least attained service
// lost).
std::vector<size_t> Round::Victims(const JobRequest& b, bool shrink) const {
  const TenantRound& bt = tenants_.at(b.tenant);
  const double b_share = DominantShare(bt.figures.used, total_, 1);
  Resources b_after = bt.figures.used;
  b_after += Gang(b);
  std::vector<size_t> victims;
  for (size_t i = 0; i < jobs_.size(); ++i) {
    const JobRequest& v = jobs_[i];
    const int held = static_cast<int>(v.allocation.size());
    if (v.Waiting() || (shrink && (!Elastic(v) || held <= v.min_learners))) continue;
    const int released = shrink ? held - v.min_learners : held;
    if (shrink) {
      // What an elastic job holds above its minimum it grew into while nobody could use it:
      // any waiting job may have it back.
      victims.push_back(i);
      continue;
    }
    if (v.tenant == b.tenant) {
      if (v.priority < b.priority) victims.push_back(i);
      continue;
    }
    const TenantRound& vt = tenants_.at(v.tenant);
    // After the swap the victim's tenant must still have at least the weighted share the blocked
    // job's tenant will have, or the two would preempt each other back and forth.
    Resources v_after = vt.figures.used;
    v_after -= v.per_learner.Times(released);
    if (b_share < bt.figures.fair_share &&
        DominantShare(vt.figures.used, total_, 1) > vt.figures.fair_share &&
        DominantShare(v_after, total_, vt.weight()) >=
            DominantShare(b_after, total_, bt.weight())) {
      victims.push_back(i);
    }
  }
  std::stable_sort(victims.begin(), victims.end(), [&](size_t x, size_t y) {
    if (jobs_[x].priority != jobs_[y].priority) return jobs_[x].priority < jobs_[y].priority;
    return jobs_[x].submitted_ms > jobs_[y].submitted_ms;
  });
  return victims;
}

// Each node with what stays allocated on it: running jobs and this round's starts.
std::vector<Node> Round::RoomWithoutVictims() const {
  std::map<std::string, int> index;
  std::vector<Node> room = s_.nodes;
  for (size_t n = 0; n < room.size(); ++n) {
    index[room[n].name] = static_cast<int>(n);
    room[n].allocated = {};
  }
  std::map<std::string, const JobRequest*> by_id;
  for (const auto& j : jobs_) {
    by_id[j.job_id] = &j;
    for (const auto& node : j.allocation) room[index[node]].allocated += j.per_learner;
  }
  for (const Placement& p : d_.placements) {
    for (const auto& node : p.learner_nodes) {
      room[index[node]].allocated += by_id[p.job_id]->per_learner;
    }
  }
  return room;
}

// Whether `b`'s starting gang fits on `room` (capacity minus what stays allocated).
bool FitsOn(const JobRequest& b, const std::vector<Node>& room) {
  std::vector<Node> left = room;
  for (auto& n : left) {
    n.capacity -= n.allocated;
    n.allocated = {};
  }
  FreeMap trial(left);
  std::vector<std::string> out;
  return b.spread ? trial.PlaceSpread(StartSize(b), b.per_learner, &out)
                  : trial.PlacePacked(StartSize(b), b.per_learner, {}, &out, b.one_node);
}

// Makes room for the blocked gang, cheapest first: the learners elastic victims hold above their
// minimum (last ranks first), then whole victims, until it fits; then shrinks and preempts what
// that took. At most one blocked gang per round; it starts in a later round, once the learners
// have left (a shrink at a step boundary, a preemption after its checkpoint).
void Round::PreemptFor(size_t blocked) {
  const JobRequest& b = jobs_[blocked];
  const TenantRound& bt = tenants_.at(b.tenant);
  if (bt.figures.share.has_quota &&
      !QuotaOverrun(bt.figures.used, Gang(b), bt.figures.share.quota).empty()) {
    return;
  }
  std::vector<std::pair<size_t, int>> steps;  // (victim, learners it keeps after the step)
  for (size_t v : Victims(b, /*shrink=*/true)) {
    const JobRequest& j = jobs_[v];
    for (int keep = static_cast<int>(j.allocation.size()) - 1; keep >= j.min_learners; --keep) {
      steps.emplace_back(v, keep);
    }
  }
  for (size_t v : Victims(b, /*shrink=*/false)) steps.emplace_back(v, 0);
  if (steps.empty()) return;
  std::map<std::string, int> index;
  for (size_t n = 0; n < s_.nodes.size(); ++n) index[s_.nodes[n].name] = static_cast<int>(n);
  std::vector<Node> room = RoomWithoutVictims();
  std::vector<std::pair<size_t, int>> kept;   // (victim, learners it keeps), in victim order
  std::map<std::string, Resources> released;  // by tenant, so far
  Resources b_after = bt.figures.used;
  b_after += Gang(b);
  for (auto [v, keep] : steps) {
    const JobRequest& j = jobs_[v];
    auto it =
        std::find_if(kept.begin(), kept.end(), [v = v](const auto& k) { return k.first == v; });
    if (it == kept.end()) it = kept.emplace(kept.end(), v, static_cast<int>(j.allocation.size()));
    int& held = it->second;
    if (keep > 0 && j.tenant != b.tenant) {
      // Another tenant's learners go back only while that tenant keeps at least the weighted
      // share the blocked job's tenant will have: nobody shrinks anybody back and forth.
      const TenantRound& vt = tenants_.at(j.tenant);
      Resources v_after = vt.figures.used;
      v_after -= released[j.tenant];
      v_after -= j.per_learner.Times(held - keep);
      if (DominantShare(v_after, total_, vt.weight()) <
          DominantShare(b_after, total_, bt.weight())) {
        continue;
      }
    }
    released[j.tenant] += j.per_learner.Times(held - std::min(held, keep));
    for (int r = keep; r < held; ++r) room[index[j.allocation[r]]].allocated -= j.per_learner;
    held = std::min(held, keep);
    if (FitsOn(b, room)) return MakeRoom(b, kept);
  }
}

// Why `victim` gives learners back to the blocked job `b`.
std::string Round::ShrinkReason(const JobRequest& victim, const JobRequest& b) const {
  const TenantRound& bt = tenants_.at(b.tenant);
  if (victim.tenant == b.tenant) {
    return victim.priority < b.priority ? "a higher-priority job of its tenant needs room"
                                        : "a waiting job needs the idle capacity it grew into";
  }
  return DominantShare(bt.figures.used, total_, 1) < bt.figures.fair_share
             ? "another tenant is below its fair share"
             : "a waiting job needs the idle capacity it grew into";
}

// Shrinks (kept > 0) and preempts (kept = 0) the victims in `kept`, and says so in the blocked
// job's reason.
void Round::MakeRoom(const JobRequest& b, const std::vector<std::pair<size_t, int>>& kept) {
  int shrunk = 0, preempted = 0;
  for (auto [v, keep] : kept) {
    const JobRequest& j = jobs_[v];
    if (keep == static_cast<int>(j.allocation.size())) continue;
    if (keep == 0) {
      d_.preempted.push_back(j.job_id);
      ++preempted;
      continue;
    }
    Placement p;
    p.job_id = j.job_id;
    p.learner_nodes.assign(j.allocation.begin(), j.allocation.begin() + keep);
    p.reason = absl::StrCat("shrink to ", keep, ": ", ShrinkReason(j, b));
    d_.placements.push_back(std::move(p));
    ++shrunk;
  }
  making_room_ = true;
  std::vector<std::string> what;
  if (shrunk > 0)
    what.push_back(absl::StrCat("shrinking ", shrunk, shrunk == 1 ? " job" : " jobs"));
  if (preempted > 0) {
    what.push_back(absl::StrCat("preempting ", preempted, preempted == 1 ? " job" : " jobs"));
  }
  for (auto& w : d_.waiting) {
    if (w.job_id != b.job_id) continue;
    w.code = WaitCode::kPreempting;
    w.reason = absl::StrCat("waiting: ", absl::StrJoin(what, " and "), " to make room");
  }
}

// The elastic jobs of each tenant, higher priority then older first: one pass over the jobs.
std::map<std::string, std::vector<size_t>> Round::ElasticByTenant() const {
  std::map<std::string, std::vector<size_t>> out;
  for (size_t i = 0; i < jobs_.size(); ++i) {
    if (Elastic(jobs_[i])) out[jobs_[i].tenant].push_back(i);
  }
  for (auto& [tenant, list] : out) {
    std::stable_sort(list.begin(), list.end(), [&](size_t a, size_t b) {
      if (jobs_[a].priority != jobs_[b].priority) return jobs_[a].priority > jobs_[b].priority;
      return jobs_[a].submitted_ms < jobs_[b].submitted_ms;
    });
  }
  return out;
}

// Elastic jobs grow one learner at a time into what is still free outside the reserved nodes:
// capacity no waiting job could use this round (every waiting job was offered it first). The
// tenant with the smallest weighted dominant share grows next, within its quota; a running job
// that grows gets a resize ("grow to 3: idle capacity").
void Round::Grow() {
  std::map<size_t, std::vector<std::string>> now;  // job -> its learners' nodes this round
  std::map<std::string, size_t> started;           // job id -> index in d_.placements
  for (size_t k = 0; k < d_.placements.size(); ++k) started[d_.placements[k].job_id] = k;
  std::map<std::string, std::vector<size_t>> candidates;
  for (const auto& [name, elastic] : ElasticByTenant()) {
    for (size_t i : elastic) {
      auto it = started.find(jobs_[i].job_id);
      if (jobs_[i].Waiting() && it == started.end()) continue;
      now[i] = jobs_[i].Waiting() ? d_.placements[it->second].learner_nodes : jobs_[i].allocation;
      if (static_cast<int>(now[i].size()) < jobs_[i].max_learners) candidates[name].push_back(i);
    }
  }
  for (;;) {
    TenantRound* pick = nullptr;
    std::string pick_name;
    double best = 0;
    for (auto& [name, list] : candidates) {
      if (list.empty()) continue;
      TenantRound& t = tenants_.at(name);
      double share = DominantShare(t.figures.used, total_, t.weight());
      if (pick == nullptr || share < best) {
        pick = &t;
        pick_name = name;
        best = share;
      }
    }
    if (pick == nullptr) break;
    std::vector<size_t>& list = candidates[pick_name];
    const size_t i = list.front();
    const JobRequest& j = jobs_[i];
    std::vector<std::string> one;
    const bool quota_ok =
        !pick->figures.share.has_quota ||
        QuotaOverrun(pick->figures.used, j.per_learner, pick->figures.share.quota).empty();
    if (!quota_ok || !free_.PlacePacked(1, j.per_learner, now[i], &one)) {
      list.erase(list.begin());  // this job cannot grow this round
      continue;
    }
    now[i].push_back(one[0]);
    pick->figures.used += j.per_learner;
    if (static_cast<int>(now[i].size()) >= j.max_learners) list.erase(list.begin());
  }
  for (auto& [i, nodes] : now) {
    const JobRequest& j = jobs_[i];
    if (auto it = started.find(j.job_id); it != started.end()) {
      d_.placements[it->second].learner_nodes = nodes;
    } else if (nodes.size() != j.allocation.size()) {
      d_.placements.push_back(
          {j.job_id, nodes, absl::StrCat("grow to ", nodes.size(), ": idle capacity"), {}});
    }
  }
}

}  // namespace

Decisions FairSharePolicy::Schedule(const ClusterSnapshot& snapshot) {
  return Round(snapshot).Run();
}

}  // namespace weft::scheduler
