#include "scheduler/fair_share_policy.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "scheduler/placement.h"

namespace weft::scheduler {

double DominantShare(const Resources& used, const Resources& total, double weight) {
  double share = 0;
  if (total.cpus > 0) share = std::max(share, used.cpus / total.cpus);
  if (total.memory_mb > 0) share = std::max(share, static_cast<double>(used.memory_mb) / total.memory_mb);
  if (total.gpus > 0) share = std::max(share, static_cast<double>(used.gpus) / total.gpus);
  return share / (weight > 0 ? weight : 1);
}

namespace {

std::string Num(double v) { return absl::StrFormat("%g", v); }

// Which resource of `quota` the gang would overrun, as "cpus 4/4", or "" if it fits.
std::string QuotaOverrun(const Resources& used, const Resources& gang, const Resources& quota) {
  Resources after = used;
  after += gang;
  if (after.cpus > quota.cpus + 1e-9) return absl::StrCat("cpus ", Num(used.cpus), "/", Num(quota.cpus));
  if (after.memory_mb > quota.memory_mb) {
    return absl::StrCat("memory ", used.memory_mb, "/", quota.memory_mb, " MiB");
  }
  if (after.gpus > quota.gpus) return absl::StrCat("gpus ", used.gpus, "/", quota.gpus);
  return "";
}

struct TenantState {
  TenantShare share;
  Resources used;
  std::vector<size_t> waiting;  // job indices, priority then submission order
  size_t next = 0;              // next waiting job to consider
  // Jobs left waiting so far, to count those of higher priority ahead of the current one.
  int left_higher = 0, left_in_group = 0;
  int group_priority = 0;
  bool any_group = false;
};

}  // namespace

Decisions FairSharePolicy::Schedule(const ClusterSnapshot& snapshot) {
  const auto& jobs = snapshot.jobs;
  Decisions d;
  Resources total;
  for (const Node& n : snapshot.nodes) total += n.capacity;

  std::map<std::string, TenantState> tenants;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const JobRequest& j = jobs[i];
    TenantState& t = tenants[j.tenant];
    if (j.Waiting()) {
      t.waiting.push_back(i);
    } else {
      t.used += j.per_learner.Times(static_cast<int>(j.allocation.size()));
    }
  }
  for (auto& [name, t] : tenants) {
    auto it = snapshot.tenants.find(name);
    if (it != snapshot.tenants.end()) t.share = it->second;
    std::stable_sort(t.waiting.begin(), t.waiting.end(),
                     [&](size_t a, size_t b) { return jobs[a].priority > jobs[b].priority; });
  }
  // Fair share of each tenant with work: its weight over the weights of all such tenants.
  double weight_sum = 0;
  for (auto& [name, t] : tenants) weight_sum += t.share.weight > 0 ? t.share.weight : 1;

  FreeMap free(snapshot.nodes);
  for (const JobRequest& j : jobs) free.Take(j);

  bool reserved = false;
  int blocked_id = -1;  // the first gang that did not fit
  auto explain = [&](size_t i, std::string reason) {
    if (snapshot.explain) d.waiting.push_back({jobs[i].job_id, std::move(reason)});
  };

  // Progressive filling: the tenant with the smallest weighted dominant share goes next.
  while (true) {
    TenantState* pick = nullptr;
    double best = 0;
    for (auto& [name, t] : tenants) {
      if (t.next >= t.waiting.size()) continue;
      double s = DominantShare(t.used, total, t.share.weight);
      if (pick == nullptr || s < best) {
        pick = &t;
        best = s;
      }
    }
    if (pick == nullptr) break;
    size_t i = pick->waiting[pick->next++];
    const JobRequest& j = jobs[i];
    const Resources gang = j.per_learner.Times(j.learners);
    if (pick->share.has_quota) {
      std::string over = QuotaOverrun(pick->used, gang, pick->share.quota);
      if (!over.empty()) {
        explain(i, absl::StrCat("waiting: tenant quota ", over));
        continue;
      }
    }
    Placement p;
    p.job_id = j.job_id;
    bool placed = free.TotalFree().Fits(gang) &&
                  (j.spread ? free.PlaceSpread(j.learners, j.per_learner, &p.learner_nodes)
                            : free.PlacePacked(j.learners, j.per_learner, {}, &p.learner_nodes));
    if (placed) {
      pick->used += gang;
      d.placements.push_back(std::move(p));
      continue;
    }
    // Higher-priority jobs of the same tenant that are still waiting (waiting is in priority order).
    if (!pick->any_group || j.priority != pick->group_priority) {
      pick->left_higher += pick->left_in_group;
      pick->left_in_group = 0;
      pick->group_priority = j.priority;
      pick->any_group = true;
    }
    const int ahead = pick->left_higher;
    ++pick->left_in_group;
    std::string why =
        ahead > 0 ? absl::StrCat("waiting: behind ", ahead, " higher-priority ", ahead == 1 ? "job" : "jobs")
                  : absl::StrCat("waiting: no node set fits ", j.learners, " learners × ",
                                 Num(j.per_learner.cpus), " cpus",
                                 j.per_learner.gpus ? absl::StrCat(", ", j.per_learner.gpus, " gpus") : "",
                                 " (", j.spread ? "spread" : "pack", ")");
    if (!reserved) {
      // Reserve the nodes this gang will use once they drain: by capacity, not free room,
      // preferring the nodes with most room now. Later jobs may only backfill elsewhere.
      std::vector<std::pair<int, int>> by_room;  // (-room now, index)
      for (size_t n = 0; n < snapshot.nodes.size(); ++n) {
        by_room.emplace_back(-LearnerSlots(free.free()[n], j.per_learner, j.learners), static_cast<int>(n));
      }
      std::sort(by_room.begin(), by_room.end());
      int need = j.learners;
      for (auto [neg_room, n] : by_room) {
        if (need <= 0) break;
        int cap = LearnerSlots(snapshot.nodes[n].capacity, j.per_learner, need);
        if (cap <= 0) continue;
        free.Reserve(n);
        need -= j.spread ? 1 : cap;
      }
      reserved = true;
      blocked_id = static_cast<int>(i);
      explain(i, ahead > 0 ? why : why + ", nodes reserved for it");
    } else {
      explain(i, ahead > 0 ? why : absl::StrCat(why, " outside the nodes reserved for ", jobs[blocked_id].job_id));
    }
  }

  // Preemption for the first blocked gang.
  if (blocked_id >= 0) {
    const JobRequest& b = jobs[blocked_id];
    const TenantState& bt = tenants[b.tenant];
    const double b_share = DominantShare(bt.used, total, bt.share.weight) * bt.share.weight;
    const double b_fair = (bt.share.weight > 0 ? bt.share.weight : 1) / weight_sum;
    bool quota_ok = !bt.share.has_quota ||
                    QuotaOverrun(bt.used, b.per_learner.Times(b.learners), bt.share.quota).empty();
    std::vector<size_t> victims;
    for (size_t i = 0; i < jobs.size(); ++i) {
      const JobRequest& v = jobs[i];
      if (v.Waiting()) continue;
      if (v.tenant == b.tenant) {
        if (v.priority < b.priority) victims.push_back(i);
        continue;
      }
      const TenantState& vt = tenants[v.tenant];
      double v_share = DominantShare(vt.used, total, vt.share.weight) * vt.share.weight;
      double v_fair = (vt.share.weight > 0 ? vt.share.weight : 1) / weight_sum;
      // Only towards fairness: after the swap the victim's tenant must still have at least the
      // weighted share the blocked job's tenant will have, or the two would preempt each other
      // back and forth.
      Resources v_after = vt.used;
      v_after -= v.per_learner.Times(static_cast<int>(v.allocation.size()));
      Resources b_after = bt.used;
      b_after += b.per_learner.Times(b.learners);
      if (b_share < b_fair && v_share > v_fair &&
          DominantShare(v_after, total, vt.share.weight) >= DominantShare(b_after, total, bt.share.weight)) {
        victims.push_back(i);
      }
    }
    // Cheapest first: lowest priority, then youngest (least attained service lost).
    std::stable_sort(victims.begin(), victims.end(), [&](size_t x, size_t y) {
      if (jobs[x].priority != jobs[y].priority) return jobs[x].priority < jobs[y].priority;
      return jobs[x].submitted_ms > jobs[y].submitted_ms;
    });
    if (quota_ok && !victims.empty()) {
      // Room per node: capacity minus what stays allocated (running jobs and this round's
      // starts); victims are released one by one until the gang fits.
      std::map<std::string, int> index;
      std::vector<Node> room = snapshot.nodes;
      for (size_t n = 0; n < room.size(); ++n) {
        index[room[n].name] = static_cast<int>(n);
        room[n].allocated = {};
      }
      std::map<std::string, const JobRequest*> by_id;
      for (const auto& j : jobs) by_id[j.job_id] = &j;
      for (const auto& j : jobs) {
        for (const auto& node : j.allocation) room[index[node]].allocated += j.per_learner;
      }
      for (const Placement& p : d.placements) {
        for (const auto& node : p.learner_nodes) room[index[node]].allocated += by_id[p.job_id]->per_learner;
      }
      std::vector<std::string> chosen;
      for (size_t v : victims) {
        for (const auto& node : jobs[v].allocation) room[index[node]].allocated -= jobs[v].per_learner;
        chosen.push_back(jobs[v].job_id);
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
        d.preempted.insert(d.preempted.end(), chosen.begin(), chosen.end());
        for (auto& w : d.waiting) {
          if (w.job_id == b.job_id) {
            w.reason = absl::StrCat("waiting: preempting ", chosen.size(), chosen.size() == 1 ? " job" : " jobs",
                                    " to make room");
          }
        }
        break;
      }
    }
  }
  return d;
}

}  // namespace weft::scheduler
