#include "scheduler/optimus_policy.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "scheduler/greedy.h"
#include "scheduler/job_model.h"
#include "scheduler/placement.h"

namespace weft::scheduler {

namespace {

int MaxSlotsPerNode(const std::vector<Node>& nodes, const Resources& per) {
  int best = 0;
  for (const Node& n : nodes) best = std::max(best, LearnerSlots(n.capacity, per, 1 << 20));
  return best;
}

}  // namespace

Decisions OptimusPolicy::Schedule(const ClusterSnapshot& snapshot) {
  const auto& jobs = snapshot.jobs;
  const size_t n = jobs.size();
  Resources left;
  for (const Node& node : snapshot.nodes) left += node.capacity;

  // 1. Admission.
  std::vector<int> count(n, 0);
  for (size_t i = 0; i < n; ++i) {
    if (left.Fits(jobs[i].per_learner) && jobs[i].max_learners >= 1) {
      left -= jobs[i].per_learner;
      count[i] = 1;
    }
  }

  // 2. Greedy by marginal gain; a max-heap on (gain, earliest submission).
  std::vector<int> per_node(n, 0);
  auto gain = [&](size_t i) -> double {
    const JobRequest& j = jobs[i];
    if (count[i] == 0 || j.model == nullptr || count[i] + 1 > j.max_learners) return 0;
    if (!left.Fits(j.per_learner)) return 0;
    if (per_node[i] == 0) per_node[i] = std::max(1, MaxSlotsPerNode(snapshot.nodes, j.per_learner));
    double now = j.model->StepSeconds(PackedCounts(count[i], per_node[i]));
    double next = j.model->StepSeconds(PackedCounts(count[i] + 1, per_node[i]));
    return (now - next) * j.model->RemainingSteps();
  };
  GrowByMarginalValue(n, gain, [&](size_t i) {
    left -= jobs[i].per_learner;
    ++count[i];
  });

  // 3. Placement.
  Decisions d;
  FreeMap free(snapshot.nodes);
  std::vector<size_t> changed = KeepUnchanged(jobs, count, &free);
  std::stable_sort(changed.begin(), changed.end(),
                   [&](size_t a, size_t b) { return count[a] < count[b]; });
  for (size_t i : changed) {
    const JobRequest& j = jobs[i];
    if (count[i] == 0) {
      if (!j.Waiting()) d.preempted.push_back(j.job_id);
      if (snapshot.explain)
        d.waiting.push_back({j.job_id, WaitCode::kOutranked,
                             "waiting: every learner slot went to jobs submitted earlier"});
      continue;
    }
    Placement p;
    p.job_id = j.job_id;
    if (j.one_node ? free.PlacePacked(count[i], j.per_learner, {}, &p.learner_nodes, true)
                   : free.PlaceMostFree(count[i], j.per_learner, &p.learner_nodes)) {
      d.placements.push_back(std::move(p));
    } else {
      if (!j.Waiting()) d.preempted.push_back(j.job_id);
      if (snapshot.explain)
        d.waiting.push_back({j.job_id, WaitCode::kNoRoom,
                             absl::StrCat("waiting: no node set has room for ", count[i],
                                          " learners (fragmented)")});
    }
  }
  return d;
}

}  // namespace weft::scheduler
