#include "scheduler/targets_policy.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "scheduler/goodput_policy.h"
#include "scheduler/greedy.h"
#include "scheduler/job_model.h"
#include "scheduler/placement.h"
#include "scheduler/shares.h"

namespace weft::scheduler {
namespace {

enum Class { kBeforeDeliver = 0, kNoTargets = 1, kDelivered = 2 };

// A job's rank: its class, then seconds to delivery (before it) or attained service (others).
struct Rank {
  Class cls = kNoTargets;
  double key = 0;
};

Rank RankOf(const JobRequest& j, int per_node) {
  switch (j.target) {
    case TargetState::kNone:
      return {kNoTargets, j.attained_service};
    case TargetState::kDelivered:
      return {kDelivered, j.attained_service};
    case TargetState::kBeforeDeliver:
      break;
  }
  double seconds = INFINITY;
  if (j.model != nullptr) {
    const double rate = j.model->Goodput(PackedCounts(std::max(1, j.min_learners), per_node));
    if (rate > 0) seconds = j.model->ProgressToDeliver() / rate;
  }
  return {kBeforeDeliver, seconds};
}

// Admission (step 2): counts, and what each tenant holds, as jobs are admitted.
struct Admission {
  std::vector<int> count;
  std::vector<bool> over_quota;  // refused only by its tenant's quota
  std::map<std::string, Resources> used;
};

Admission Admit(const ClusterSnapshot& snapshot, const std::vector<size_t>& order,
                Resources* left) {
  const auto& jobs = snapshot.jobs;
  const std::map<std::string, TenantShares> shares = ComputeTenantShares(snapshot);
  const Resources total = TotalCapacity(snapshot.nodes);
  Admission a{std::vector<int>(jobs.size(), 0), std::vector<bool>(jobs.size(), false), {}};
  for (const bool within_fair_share : {true, false}) {
    for (size_t i : order) {
      const JobRequest& j = jobs[i];
      if (a.count[i] > 0 || j.min_learners < 1) continue;
      const Resources gang = j.per_learner.Times(j.min_learners);
      Resources after = a.used[j.tenant];
      after += gang;
      const TenantShares& t = shares.at(j.tenant);
      if (t.share.has_quota && !t.share.quota.Fits(after)) {
        a.over_quota[i] = true;
        continue;
      }
      if (!left->Fits(gang)) continue;
      if (within_fair_share && DominantShare(after, total, 1) > t.fair_share + 1e-9) continue;
      *left -= gang;
      a.used[j.tenant] = after;
      a.count[i] = j.min_learners;
    }
  }
  return a;
}

// How many more learners of `j` its tenant's quota allows beyond `used`.
int QuotaRoom(const ClusterSnapshot& snapshot, const JobRequest& j, const Resources& used) {
  auto it = snapshot.tenants.find(j.tenant);
  if (it == snapshot.tenants.end() || !it->second.has_quota) return 1 << 20;
  Resources room = it->second.quota;
  room -= used;
  return LearnerSlots(room, j.per_learner, 1 << 20);
}

// Why a job the round left waiting waits.
Waiting Why(const JobRequest& j, Rank rank, bool outranked, bool over_quota, int closer) {
  if (over_quota) {
    return {j.job_id, WaitCode::kQuota,
            absl::StrCat("waiting: tenant ", j.tenant, " is at its quota")};
  }
  if (!outranked) {
    return {j.job_id, WaitCode::kNoRoom, "waiting: no node set has room for its learners"};
  }
  switch (rank.cls) {
    case kBeforeDeliver:
      return {j.job_id, WaitCode::kOutranked,
              absl::StrCat("waiting: ", closer, " undelivered job", closer == 1 ? " is" : "s are",
                           " closer to ", closer == 1 ? "its" : "their", " target")};
    case kNoTargets:
      return {j.job_id, WaitCode::kOutranked,
              "waiting: the cluster is full of jobs before their deliver target or with less "
              "attained service"};
    case kDelivered:
      break;
  }
  return {j.job_id, WaitCode::kOutranked,
          "waiting: delivered; jobs that have not reached their deliver target come first"};
}

// Why each job of d->preempted is preempted, by its class.
void ExplainPreemptions(const std::vector<JobRequest>& jobs, const std::vector<Rank>& rank,
                        Decisions* d) {
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < jobs.size(); ++i) index.emplace(jobs[i].job_id, i);
  for (const std::string& id : d->preempted) {
    switch (rank[index.at(id)].cls) {
      case kDelivered:
        d->preempt_reasons[id] =
            "preempted: delivered, and a job before its deliver target needs its room";
        break;
      case kBeforeDeliver:
        d->preempt_reasons[id] =
            "preempted: jobs estimated closer to their deliver target need its room";
        break;
      case kNoTargets:
        d->preempt_reasons[id] =
            "preempted: jobs before their deliver target, or a tenant below its fair share, "
            "need its room";
        break;
    }
  }
}

// 1. The order jobs are considered in: by class; before delivery by the estimate (a running
// job's shrunk by 1 + keep_bonus), otherwise a running job ahead of waiting peers; then by
// submission.
std::vector<size_t> Order(const std::vector<JobRequest>& jobs, const std::vector<Rank>& rank,
                          double keep_bonus) {
  const size_t n = jobs.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (rank[a].cls != rank[b].cls) return rank[a].cls < rank[b].cls;
    // Inside the classes ordered by service, a running job keeps its place ahead of waiting
    // peers: least attained service alone would swap two jobs back and forth round after round,
    // each swap a checkpoint and a restart.
    if (rank[a].cls != kBeforeDeliver && jobs[a].Waiting() != jobs[b].Waiting()) {
      return !jobs[a].Waiting();
    }
    // Before delivery, a running job ranks as if (1 + keep_bonus) times closer to its target
    // than estimated: estimates from a noisy curve move, and a waiting job must be clearly
    // closer to be worth a checkpoint and a restart of the running one.
    auto key = [&](size_t i) {
      return rank[i].cls == kBeforeDeliver && !jobs[i].Waiting() ? rank[i].key / (1.0 + keep_bonus)
                                                                 : rank[i].key;
    };
    if (key(a) != key(b)) return key(a) < key(b);
    return jobs[a].submitted_ms < jobs[b].submitted_ms;
  });
  return order;
}

}  // namespace

Decisions TargetsPolicy::Schedule(const ClusterSnapshot& snapshot) {
  const auto& jobs = snapshot.jobs;
  const size_t n = jobs.size();
  const int per_node = LearnersPerNode(snapshot);
  std::vector<Rank> rank(n);
  for (size_t i = 0; i < n; ++i) rank[i] = RankOf(jobs[i], per_node);
  const std::vector<size_t> order = Order(jobs, rank, options_.keep_bonus);
  Resources left = TotalCapacity(snapshot.nodes);
  Admission admitted = Admit(snapshot, order, &left);
  std::vector<int>& count = admitted.count;

  // 3. Water-filling on class-weighted speedup gain, as the goodput policy's.
  std::vector<int> step(n, 1);
  auto weight = [&](size_t i) {
    const double aging = 1.0 / (1.0 + jobs[i].attained_service / options_.aging_s);
    switch (rank[i].cls) {
      case kBeforeDeliver:
        return aging * options_.before_deliver_weight /
               (1.0 + rank[i].key / options_.deliver_horizon_s);
      case kNoTargets:
        return aging;
      case kDelivered:
        break;
    }
    return aging * options_.delivered_weight;
  };
  auto value = [&](size_t i) -> double {
    const JobRequest& j = jobs[i];
    if (count[i] == 0 || j.model == nullptr || count[i] >= j.max_learners) return 0;
    int room = std::min({LearnerSlots(left, j.per_learner, 1 << 20), j.max_learners - count[i],
                         QuotaRoom(snapshot, j, admitted.used[j.tenant])});
    if (room <= 0) return 0;
    const double gain = SpeedupGainPerLearner(*j.model, count[i], room, per_node, &step[i]);
    const int holds = static_cast<int>(j.allocation.size());
    if (holds > 0 && count[i] + step[i] > holds &&
        !ResizePays(*j.model, holds, count[i] + room, per_node)) {
      return 0.0;  // growing past what it holds saves less than the resize costs, even to all
    }
    double w = weight(i);
    if (count[i] + step[i] <= holds) w *= 1.0 + options_.keep_bonus;
    return gain * w;
  };
  GrowByMarginalValue(n, value, [&](size_t i) {
    const Resources more = jobs[i].per_learner.Times(step[i]);
    left -= more;
    admitted.used[jobs[i].tenant] += more;
    count[i] += step[i];
  });
  KeepGrowsThatPay(jobs, per_node, &count);

  // 4. Placement; a job before its target that waits is told how many such jobs rank ahead.
  std::vector<int> closer(n, 0);
  int admitted_before = 0;
  for (size_t i : order) {
    if (rank[i].cls != kBeforeDeliver) break;
    closer[i] = admitted_before;
    if (count[i] > 0) ++admitted_before;
  }
  Decisions d = PlaceCounts(
      snapshot, count,
      [&](size_t i, bool outranked) {
        return Why(jobs[i], rank[i], outranked, admitted.over_quota[i] && count[i] == 0, closer[i]);
      },
      Name());
  if (snapshot.explain) ExplainPreemptions(jobs, rank, &d);
  return d;
}

}  // namespace weft::scheduler
