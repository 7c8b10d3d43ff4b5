#include "scheduler/goodput_policy.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "scheduler/greedy.h"
#include "scheduler/job_model.h"
#include "scheduler/placement.h"

namespace weft::scheduler {

namespace {

// 1. Admission: each job's min_learners, by discretised least attained service (LasQueue) and
// then by submission, while the cluster's total has room. Takes what it admits out of `left`.
std::vector<int> Admit(const std::vector<JobRequest>& jobs, double las_first_s, Resources* left) {
  std::vector<size_t> order(jobs.size());
  std::vector<int> queue(jobs.size());
  for (size_t i = 0; i < order.size(); ++i) {
    order[i] = i;
    queue[i] = LasQueue(jobs[i].attained_service, las_first_s);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (queue[a] != queue[b]) return queue[a] < queue[b];
    return jobs[a].submitted_ms < jobs[b].submitted_ms;
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

}  // namespace

int LasQueue(double attained_s, double first_s) {
  if (!(attained_s >= first_s) || !(first_s > 0)) return 0;  // NaN and negatives: queue 0
  return 1 + static_cast<int>(std::min(62.0, std::floor(std::log2(attained_s / first_s))));
}

int LearnersPerNode(const ClusterSnapshot& snapshot) {
  int per_node = 1;
  if (snapshot.jobs.empty()) return per_node;
  for (const Node& node : snapshot.nodes) {
    per_node =
        std::max(per_node, LearnerSlots(node.capacity, snapshot.jobs[0].per_learner, 1 << 20));
  }
  return per_node;
}

double SpeedupGainPerLearner(const JobModel& model, int count, int room, int per_node, int* step) {
  const double base = model.Goodput(PackedCounts(1, per_node));
  if (!(base > 0)) return 0;
  const double now = model.Goodput(PackedCounts(count, per_node));
  double best = 0;
  for (int k = 1; k <= std::min(room, per_node); ++k) {
    const double per_learner = (model.Goodput(PackedCounts(count + k, per_node)) - now) / k;
    if (per_learner > best) {
      best = per_learner;
      *step = k;
    }
  }
  return best / base;
}

Decisions GoodputPolicy::Schedule(const ClusterSnapshot& snapshot) {
  const auto& jobs = snapshot.jobs;
  const size_t n = jobs.size();
  Resources left;
  for (const Node& node : snapshot.nodes) left += node.capacity;
  std::vector<int> count = Admit(jobs, options_.las_first_s, &left);
  const int per_node = LearnersPerNode(snapshot);

  // 2. Water-filling on weighted speedup gain.
  // Goodput is not concave in learners (crossing onto a second node can slow a job down before
  // more learners speed it up again), so each step looks ahead up to a node's worth of learners
  // and takes the best gain per learner.
  std::vector<int> step(n, 1);
  auto value = [&](size_t i) -> double {
    const JobRequest& j = jobs[i];
    if (count[i] == 0 || j.model == nullptr || count[i] >= j.max_learners) return 0;
    const int room =
        std::min(LearnerSlots(left, j.per_learner, 1 << 20), j.max_learners - count[i]);
    if (room <= 0) return 0;
    const double gain = SpeedupGainPerLearner(*j.model, count[i], room, per_node, &step[i]);
    const int holds = static_cast<int>(j.allocation.size());
    if (holds > 0 && count[i] + step[i] > holds &&
        !ResizePays(*j.model, holds, count[i] + room, per_node)) {
      return 0.0;  // growing past what it holds saves less than the resize costs, even to all
    }
    double w = 1.0 / (1.0 + j.attained_service / options_.aging_s);
    if (count[i] + step[i] <= holds) w *= 1.0 + options_.keep_bonus;
    return gain * w;
  };
  GrowByMarginalValue(n, value, [&](size_t i) {
    left -= jobs[i].per_learner.Times(step[i]);
    count[i] += step[i];
  });
  KeepGrowsThatPay(jobs, per_node, &count);
  return PlaceCounts(
      snapshot, count,
      [&](size_t i, bool outranked) {
        return Waiting{
            jobs[i].job_id, outranked ? WaitCode::kOutranked : WaitCode::kNoRoom,
            outranked ? std::string(
                            "waiting: the cluster is full of jobs ahead of it in attained service "
                            "(less of it, or as little and submitted earlier)")
                      : absl::StrCat("waiting: no node set has room for ", count[i], " learners")};
      },
      Name());
}

}  // namespace weft::scheduler
