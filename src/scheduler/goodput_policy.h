#pragma once

#include "scheduler/job_model.h"
#include "scheduler/policy.h"

namespace weft::scheduler {

// weft's goodput-adaptive policy, after the idea of Pollux (Qiao et al., "Pollux: Co-adaptive
// Cluster Scheduling for Goodput-Optimized Deep Learning", OSDI'21): size every elastic job by its
// goodput (throughput × statistical efficiency at the best batch size, JobModel::Goodput) rather
// than by the learners it asked for, re-deciding every round. Our own optimiser, not a genetic
// algorithm:
//  1. admission in discretised least-attained-service order (Tiresias's insight: jobs that have
//     had little service are likely short; LasQueue): every job gets min_learners while the
//     cluster has room, by queue and within a queue by submission;
//  2. greedy water-filling: learners go to the job whose normalised goodput gain per learner
//     (G(r+k) − G(r)) / (k · G(1)) — its speedup gain — weighted by 1 / (1 + attained / aging_s)
//     is largest, up to max_learners. k looks ahead up to one node's worth of learners, because
//     goodput is not concave (a job's second node first slows it, then speeds it up). A running
//     job's way back to its current size weighs (1 + keep_bonus) times more, because any change
//     costs it a restart, and it grows past what it holds only when the time the growth saves
//     on the rest of the job exceeds the resize's cost (ResizePays, scheduler/placement.h);
//  3. unchanged jobs keep their nodes; changed ones, largest first, are packed onto as few nodes
//     as possible, preferring the nodes they hold. In weftd an elastic job is grown and shrunk
//     in place (its learners stay where they are: PlaceCounts), a rigid one restarts.
// Jobs without a model get min_learners only.

// Tiresias' discretised least attained service (Gu et al., "Tiresias: A GPU Cluster Manager for
// Distributed Deep Learning", NSDI'19), its queues spaced exponentially: the queue of a job that
// has attained `attained_s` learner-seconds — 0 below `first_s`, then one more each time the
// service doubles (1 from first_s, 2 from 2·first_s, …). Ordering by the queue, and by submission
// within it, rather than by the service itself keeps a job's place while it runs: with continuous
// service, a running job and a waiting one with a little less swap places every few rounds once
// rounds are short (weft-sim's goodput runs of the live replay restarted jobs 150–200 times each,
// docs/simulation.md).
int LasQueue(double attained_s, double first_s);

// Shared with the targets policy, which sizes jobs the same way:
// The most learners of the first job's shape one node holds (at least 1): how far growth looks
// ahead, and how PackedCounts lays learners out.
int LearnersPerNode(const ClusterSnapshot& snapshot);
// The best goodput gain per learner of growing a job of `model` from `count` learners by k in
// 1..min(room, per_node), over its goodput on one learner (so a speedup, comparable across jobs);
// *step = that k. 0 when no k gains or the job has no goodput on one learner.
double SpeedupGainPerLearner(const JobModel& model, int count, int room, int per_node, int* step);

class GoodputPolicy : public Policy {
 public:
  struct Options {
    double aging_s = 4 * 3600;  // learner-seconds at which a job's weight halves
    double keep_bonus = 2.0;    // extra weight for learners a running job already holds
    double las_first_s = 600;   // learner-seconds attained at which a job leaves queue 0
  };
  GoodputPolicy() = default;
  explicit GoodputPolicy(Options options) : options_(options) {}
  std::string Name() const override { return "goodput"; }
  Decisions Schedule(const ClusterSnapshot& snapshot) override;

 private:
  Options options_;
};

}  // namespace weft::scheduler
