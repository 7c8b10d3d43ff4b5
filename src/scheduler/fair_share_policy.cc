#include "scheduler/fair_share_policy.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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

Resources Gang(const JobRequest& j) { return j.per_learner.Times(j.learners); }

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
  std::vector<size_t> Victims(const JobRequest& b) const;
  std::vector<Node> RoomWithoutVictims() const;

  const ClusterSnapshot& s_;
  const std::vector<JobRequest>& jobs_;
  const Resources total_;
  std::map<std::string, TenantRound> tenants_;
  FreeMap free_;
  Decisions d_;
  int blocked_ = -1;  // the first gang that did not fit; nodes are reserved for it
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
  bool placed = free_.TotalFree().Fits(Gang(j)) &&
                (j.spread ? free_.PlaceSpread(j.learners, j.per_learner, &p.learner_nodes)
                          : free_.PlacePacked(j.learners, j.per_learner, {}, &p.learner_nodes));
  if (!placed) return LeaveWaiting(t, i);
  t.figures.used += Gang(j);
  d_.placements.push_back(std::move(p));
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
      "waiting: no node set fits ", j.learners, " learners × ", Num(j.per_learner.cpus), " cpus",
      j.per_learner.gpus ? absl::StrCat(", ", j.per_learner.gpus, " gpus") : "", " (",
      j.spread ? "spread" : "pack", ")");
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
    by_room.emplace_back(-LearnerSlots(free_.free()[n], j.per_learner, j.learners),
                         static_cast<int>(n));
  }
  std::sort(by_room.begin(), by_room.end());
  int need = j.learners;
  for (auto [neg_room, n] : by_room) {
    if (need <= 0) break;
    int cap = LearnerSlots(s_.nodes[n].capacity, j.per_learner, need);
    if (cap <= 0) continue;
    free_.Reserve(n);
    need -= j.spread ? 1 : cap;
  }
}

// Running jobs the blocked gang may preempt, cheapest first (lowest priority, then youngest:
// least attained service lost): lower-priority jobs of its own tenant, and jobs of tenants above
// their fair share while its tenant is below its own, only towards fairness.
std::vector<size_t> Round::Victims(const JobRequest& b) const {
  const TenantRound& bt = tenants_.at(b.tenant);
  const double b_share = DominantShare(bt.figures.used, total_, 1);
  Resources b_after = bt.figures.used;
  b_after += Gang(b);
  std::vector<size_t> victims;
  for (size_t i = 0; i < jobs_.size(); ++i) {
    const JobRequest& v = jobs_[i];
    if (v.Waiting()) continue;
    if (v.tenant == b.tenant) {
      if (v.priority < b.priority) victims.push_back(i);
      continue;
    }
    const TenantRound& vt = tenants_.at(v.tenant);
    // After the swap the victim's tenant must still have at least the weighted share the blocked
    // job's tenant will have, or the two would preempt each other back and forth.
    Resources v_after = vt.figures.used;
    v_after -= v.per_learner.Times(static_cast<int>(v.allocation.size()));
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

// Releases victims one by one until the blocked gang fits, and preempts them if it does. At most
// one such preemption per round; the gang starts in a later round, once they have released
// their nodes.
void Round::PreemptFor(size_t blocked) {
  const JobRequest& b = jobs_[blocked];
  const TenantRound& bt = tenants_.at(b.tenant);
  if (bt.figures.share.has_quota &&
      !QuotaOverrun(bt.figures.used, Gang(b), bt.figures.share.quota).empty()) {
    return;
  }
  std::vector<size_t> victims = Victims(b);
  if (victims.empty()) return;
  std::map<std::string, int> index;
  for (size_t n = 0; n < s_.nodes.size(); ++n) index[s_.nodes[n].name] = static_cast<int>(n);
  std::vector<Node> room = RoomWithoutVictims();
  std::vector<std::string> chosen;
  for (size_t v : victims) {
    for (const auto& node : jobs_[v].allocation) {
      room[index[node]].allocated -= jobs_[v].per_learner;
    }
    chosen.push_back(jobs_[v].job_id);
    std::vector<Node> left = room;
    for (auto& n : left) {
      n.capacity -= n.allocated;
      n.allocated = {};
    }
    FreeMap trial(left);
    std::vector<std::string> out;
    bool fits = b.spread ? trial.PlaceSpread(b.learners, b.per_learner, &out)
                         : trial.PlacePacked(b.learners, b.per_learner, {}, &out);
    if (!fits) continue;
    d_.preempted.insert(d_.preempted.end(), chosen.begin(), chosen.end());
    for (auto& w : d_.waiting) {
      if (w.job_id != b.job_id) continue;
      w.code = WaitCode::kPreempting;
      w.reason = absl::StrCat("waiting: preempting ", chosen.size(),
                              chosen.size() == 1 ? " job" : " jobs", " to make room");
    }
    return;
  }
}

}  // namespace

Decisions FairSharePolicy::Schedule(const ClusterSnapshot& snapshot) {
  return Round(snapshot).Run();
}

}  // namespace weft::scheduler
