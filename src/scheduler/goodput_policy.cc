#include "scheduler/goodput_policy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "scheduler/greedy.h"
#include "scheduler/job_model.h"
#include "scheduler/placement.h"

namespace weft::scheduler {

namespace {

// 1. Admission: each job's min_learners, least attained service first, while the cluster's
// total has room. Takes what it admits out of `left`.
std::vector<int> Admit(const std::vector<JobRequest>& jobs, Resources* left) {
  std::vector<size_t> order(jobs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return jobs[a].attained_service < jobs[b].attained_service;
  });
  std::vector<int> count(jobs.size(), 0);
  for (size_t i : order) {
    const JobRequest& j = jobs[i];
    const Resources gang = j.per_learner.Times(j.min_learners);
    if (j.min_learners >= 1 && left->Fits(gang)) {
      *left -= gang;
      count[i] = j.min_learners;
    }
  }
  return count;
}

// 3. Placement: jobs whose count is unchanged keep their nodes; the others are packed, largest
// first, preferring the nodes they hold; a job that gets no learners is preempted or waits.
Decisions Place(const ClusterSnapshot& snapshot, const std::vector<int>& count) {
  const auto& jobs = snapshot.jobs;
  Decisions d;
  FreeMap free(snapshot.nodes);
  std::vector<size_t> changed = KeepUnchanged(jobs, count, &free);
  std::stable_sort(changed.begin(), changed.end(),
                   [&](size_t a, size_t b) { return count[a] > count[b]; });
  for (size_t i : changed) {
    const JobRequest& j = jobs[i];
    Placement p;
    p.job_id = j.job_id;
    if (count[i] > 0 && free.PlacePacked(count[i], j.per_learner, j.allocation, &p.learner_nodes)) {
      d.placements.push_back(std::move(p));
      continue;
    }
    if (!j.Waiting()) d.preempted.push_back(j.job_id);
    if (!snapshot.explain) continue;
    d.waiting.push_back(
        {j.job_id, count[i] == 0 ? WaitCode::kOutranked : WaitCode::kNoRoom,
         count[i] == 0
             ? std::string("waiting: the cluster is full of jobs with less attained service")
             : absl::StrCat("waiting: no node set has room for ", count[i], " learners")});
  }
  return d;
}

}  // namespace

Decisions GoodputPolicy::Schedule(const ClusterSnapshot& snapshot) {
  const auto& jobs = snapshot.jobs;
  const size_t n = jobs.size();
  Resources left;
  for (const Node& node : snapshot.nodes) left += node.capacity;
  std::vector<int> count = Admit(jobs, &left);
  int per_node = 1;
  for (const Node& node : snapshot.nodes) {
    if (jobs.empty()) break;
    per_node = std::max(per_node, LearnerSlots(node.capacity, jobs[0].per_learner, 1 << 20));
  }

  // 2. Water-filling on weighted speedup gain.
  // Goodput is not concave in learners (crossing onto a second node can slow a job down before
  // more learners speed it up again), so each step looks ahead up to a node's worth of learners
  // and takes the best gain per learner.
  std::vector<double> base(n, 0);
  std::vector<int> step(n, 1);
  auto slots_left = [&](const Resources& per) { return LearnerSlots(left, per, 1 << 20); };
  auto value = [&](size_t i) -> double {
    const JobRequest& j = jobs[i];
    if (count[i] == 0 || j.model == nullptr || count[i] >= j.max_learners) return 0;
    int room = std::min(slots_left(j.per_learner), j.max_learners - count[i]);
    if (room <= 0) return 0;
    if (base[i] == 0) base[i] = j.model->Goodput(PackedCounts(1, per_node));
    if (base[i] <= 0) return 0;
    double now = j.model->Goodput(PackedCounts(count[i], per_node));
    double best = 0;
    for (int k = 1; k <= std::min(room, per_node); ++k) {
      double per_learner = (j.model->Goodput(PackedCounts(count[i] + k, per_node)) - now) / k;
      if (per_learner > best) {
        best = per_learner;
        step[i] = k;
      }
    }
    double w = 1.0 / (1.0 + j.attained_service / options_.aging_s);
    if (count[i] + step[i] <= static_cast<int>(j.allocation.size())) w *= 1.0 + options_.keep_bonus;
    return best / base[i] * w;
  };
  GrowByMarginalValue(n, value, [&](size_t i) {
    left -= jobs[i].per_learner.Times(step[i]);
    count[i] += step[i];
  });
  return Place(snapshot, count);
}

}  // namespace weft::scheduler
