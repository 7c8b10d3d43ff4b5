// Tiresias, Optimus, weft's goodput and targets policies on small hand-built snapshots, and the
// placement helpers they share.
#include <algorithm>
#include <map>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/decision_check.h"
#include "scheduler/goodput_policy.h"
#include "scheduler/job_model.h"
#include "scheduler/optimus_policy.h"
#include "scheduler/placement.h"
#include "scheduler/targets_policy.h"
#include "scheduler/tiresias_policy.h"

namespace weft::scheduler {
namespace {

ClusterSnapshot Cluster(int nodes, int gpus_per_node) {
  ClusterSnapshot s;
  for (int n = 0; n < nodes; ++n) {
    Node node;
    node.name = "n" + std::to_string(n);
    node.capacity.gpus = gpus_per_node;
    s.nodes.push_back(node);
  }
  return s;
}

JobRequest Gpus(const std::string& id, int learners, std::vector<std::string> alloc = {}) {
  JobRequest j;
  j.job_id = id;
  j.learners = j.min_learners = j.max_learners = learners;
  j.per_learner.gpus = 1;
  j.allocation = std::move(alloc);
  return j;
}

void Hold(ClusterSnapshot& s) {
  for (auto& n : s.nodes) n.allocated = {};
  for (const auto& j : s.jobs) {
    for (const auto& name : j.allocation) {
      for (auto& n : s.nodes) {
        if (n.name == name) n.allocated += j.per_learner;
      }
    }
  }
}

// Apply decisions to the snapshot as a cluster would.
void Apply(ClusterSnapshot& s, const Decisions& d) {
  for (auto& j : s.jobs) {
    for (const auto& id : d.preempted) {
      if (id == j.job_id) j.allocation.clear();
    }
    for (const auto& p : d.placements) {
      if (p.job_id == j.job_id) j.allocation = p.learner_nodes;
    }
  }
  Hold(s);
}

std::map<std::string, int> Used(const ClusterSnapshot& s) {
  std::map<std::string, int> used;
  for (const auto& j : s.jobs) {
    for (const auto& n : j.allocation) used[n]++;
  }
  return used;
}

const Waiting* WaitingOf(const Decisions& d, const std::string& id) {
  for (const Waiting& w : d.waiting) {
    if (w.job_id == id) return &w;
  }
  return nullptr;
}

TEST(PlacementTest, MostFreeNodeGreedyTiesToLowestIndex) {
  ClusterSnapshot s = Cluster(3, 4);
  FreeMap free(s.nodes);
  std::vector<std::string> out;
  ASSERT_TRUE(free.PlaceMostFree(6, Resources{0, 0, 1}, &out));
  EXPECT_EQ(out, (std::vector<std::string>{"n0", "n0", "n0", "n0", "n1", "n1"}));
  ASSERT_TRUE(free.PlaceMostFree(3, Resources{0, 0, 1}, &out));
  EXPECT_EQ(out, (std::vector<std::string>{"n2", "n2", "n2"}));
  EXPECT_FALSE(free.PlaceMostFree(4, Resources{0, 0, 1}, &out));  // 3 left: nothing taken
  ASSERT_TRUE(free.PlaceMostFree(3, Resources{0, 0, 1}, &out));
  EXPECT_EQ(out, (std::vector<std::string>{"n1", "n1", "n2"}));
}

TEST(PlacementTest, PackedPrefersOneNodeAndTheJobsOwnNodes) {
  ClusterSnapshot s = Cluster(3, 4);
  s.jobs = {Gpus("a", 1, {"n0"}), Gpus("b", 2, {"n1", "n1"})};
  FreeMap free(s.nodes);
  for (const auto& j : s.jobs) free.Take(j);
  std::vector<std::string> out;
  // 2 learners: n1 has exactly 2 free — the smallest hole that fits, not the empty n2.
  ASSERT_TRUE(free.PlacePacked(2, Resources{0, 0, 1}, {}, &out));
  EXPECT_EQ(out, (std::vector<std::string>{"n1", "n1"}));
  // 5 learners with n0 as the job's own node: n0's 3, then the most free other node.
  ASSERT_TRUE(free.PlacePacked(5, Resources{0, 0, 1}, {"n0"}, &out));
  EXPECT_EQ(out, (std::vector<std::string>{"n0", "n0", "n0", "n2", "n2"}));
  EXPECT_EQ(CountsOf(out), (NodeCounts{3, 2}));
  EXPECT_EQ(PackedCounts(6, 4), (NodeCounts{4, 2}));
}

TEST(TiresiasPolicyTest, WholeGangsInQueueOrderSmallerJobsBehindMayStart) {
  ClusterSnapshot s = Cluster(2, 4);
  s.jobs = {Gpus("a", 6), Gpus("b", 4), Gpus("c", 2)};
  TiresiasPolicy t;
  s.now_ms = 60000;
  Decisions d = t.Schedule(s);
  Apply(s, d);
  EXPECT_EQ(s.jobs[0].allocation.size(), 6u);
  EXPECT_TRUE(s.jobs[1].allocation.empty());   // 4 do not fit in the 2 left
  EXPECT_EQ(s.jobs[2].allocation.size(), 2u);  // but 2 do
  for (auto [node, n] : Used(s)) EXPECT_LE(n, 4) << node;
}

TEST(TiresiasPolicyTest, DemotesPastTheThresholdAndPreemptsForQueueZero) {
  ClusterSnapshot s = Cluster(1, 4);
  s.jobs = {Gpus("long", 4)};
  TiresiasPolicy t(/*queue_threshold_s=*/4 * 600);  // 10 minutes on 4 GPUs
  for (int round = 1; round <= 12; ++round) {
    s.now_ms = round * 60000;
    Apply(s, t.Schedule(s));
  }
  ASSERT_EQ(s.jobs[0].allocation.size(), 4u);
  const std::vector<std::string> before = s.jobs[0].allocation;
  s.jobs.push_back(Gpus("new", 2));
  s.now_ms += 60000;
  Decisions d = t.Schedule(s);
  EXPECT_EQ(d.preempted, std::vector<std::string>{"long"});  // demoted: behind the newcomer
  Apply(s, d);
  EXPECT_EQ(s.jobs[1].allocation.size(), 2u);
  // Without demotion (a threshold never reached) the running job keeps its nodes.
  ClusterSnapshot s2 = Cluster(1, 4);
  s2.jobs = {Gpus("long", 4)};
  TiresiasPolicy patient(1e12);
  for (int round = 1; round <= 12; ++round) {
    s2.now_ms = round * 60000;
    Apply(s2, patient.Schedule(s2));
  }
  s2.jobs.push_back(Gpus("new", 2));
  s2.now_ms += 60000;
  Decisions d2 = patient.Schedule(s2);
  EXPECT_TRUE(d2.preempted.empty());
  EXPECT_TRUE(d2.placements.empty());
}

// Speed = learners up to `knee`, flat after; remaining work fixed.
class KneeModel : public JobModel {
 public:
  KneeModel(int knee, double work) : knee_(knee), work_(work) {}
  double StepSeconds(const NodeCounts& p) const override {
    int r = 0;
    for (int c : p) r += c;
    return 1.0 / std::min(r, knee_);
  }
  double RemainingSteps() const override { return work_; }
  double Goodput(const NodeCounts& p) const override { return 1.0 / StepSeconds(p); }

 private:
  int knee_;
  double work_;
};

TEST(OptimusPolicyTest, AdmitsEveryJobThenGivesLearnersToTheLargestGain) {
  ClusterSnapshot s = Cluster(2, 4);
  KneeModel small(2, 100), big(8, 1000);
  JobRequest a = Gpus("small", 1), b = Gpus("big", 1);
  a.max_learners = b.max_learners = 8;
  a.model = &small;
  b.model = &big;
  s.jobs = {a, b};
  OptimusPolicy optimus;
  Apply(s, optimus.Schedule(s));
  // small stops at its knee (2); big takes the other 6.
  EXPECT_EQ(s.jobs[0].allocation.size(), 2u);
  EXPECT_EQ(s.jobs[1].allocation.size(), 6u);
  for (auto [node, n] : Used(s)) EXPECT_LE(n, 4) << node;
  // A third job arrives: admission first, so it gets a learner from someone.
  JobRequest c = Gpus("late", 1);
  c.max_learners = 8;
  c.model = &small;
  s.jobs.push_back(c);
  Apply(s, optimus.Schedule(s));
  EXPECT_GE(s.jobs[2].allocation.size(), 1u);
  int total = 0;
  for (const auto& j : s.jobs) total += j.allocation.size();
  EXPECT_EQ(total, 8);
}

class LinearModel : public JobModel {
 public:
  double StepSeconds(const NodeCounts&) const override { return 1; }
  double RemainingSteps() const override { return 1; }
  double Goodput(const NodeCounts& p) const override {
    int r = 0;
    for (int c : p) r += c;
    return r;
  }
};

TEST(GoodputPolicyTest, LooksPastTheSecondNodeDipAndNeverOverCommits) {
  ClusterSnapshot s = Cluster(4, 4);
  LinearModel linear;
  JobRequest j = Gpus("linear", 1);
  j.max_learners = 16;
  j.model = &linear;
  s.jobs = {j};
  GoodputPolicy policy;
  Apply(s, policy.Schedule(s));
  // Linear speedup, alone: the whole cluster, across the node boundaries.
  EXPECT_EQ(s.jobs[0].allocation.size(), 16u);
  for (auto [node, n] : Used(s)) EXPECT_LE(n, 4) << node;
}

TEST(GoodputPolicyTest, KeepsARunningJobUnlessTheGainIsWorthARestart) {
  ClusterSnapshot s = Cluster(2, 4);
  KneeModel knee4(4, 1), knee8(8, 1);
  JobRequest a = Gpus("a", 1, {"n0", "n0", "n0", "n0"});
  a.max_learners = 8;
  a.model = &knee4;
  a.attained_service = 1000;
  JobRequest b = Gpus("b", 1, {"n1", "n1", "n1", "n1"});
  b.max_learners = 8;
  b.model = &knee8;
  b.attained_service = 1000;
  s.jobs = {a, b};
  Hold(s);
  GoodputPolicy policy;
  Decisions d = policy.Schedule(s);
  // a cannot use more than 4; b could use 8 but only 4 are free of a: nothing changes.
  EXPECT_TRUE(d.placements.empty());
  EXPECT_TRUE(d.preempted.empty());
}

TEST(GoodputPolicyTest, NewJobsGetAdmittedBeforeOldJobsGrow) {
  ClusterSnapshot s = Cluster(1, 4);
  LinearModel linear;
  JobRequest old = Gpus("old", 1, {"n0", "n0", "n0", "n0"});
  old.max_learners = 4;
  old.model = &linear;
  old.attained_service = 36000;
  JobRequest fresh = Gpus("fresh", 1);
  fresh.max_learners = 4;
  fresh.model = &linear;
  s.jobs = {old, fresh};
  Hold(s);
  GoodputPolicy policy;
  Apply(s, policy.Schedule(s));
  EXPECT_GE(s.jobs[1].allocation.size(), 1u);  // least attained service goes first
  EXPECT_GE(s.jobs[0].allocation.size(), 1u);  // and the old job keeps at least one
  for (auto [node, n] : Used(s)) EXPECT_LE(n, 4) << node;
}

TEST(GoodputPolicyTest, AttainedServiceIsDiscretisedIntoQueuesThatDoubleFromTheFirst) {
  EXPECT_EQ(LasQueue(0, 600), 0);
  EXPECT_EQ(LasQueue(599, 600), 0);
  EXPECT_EQ(LasQueue(600, 600), 1);
  EXPECT_EQ(LasQueue(1199, 600), 1);
  EXPECT_EQ(LasQueue(1200, 600), 2);
  EXPECT_EQ(LasQueue(36000, 600), 6);  // 600 × 2^5 = 19,200 ≤ 36,000 < 38,400
  EXPECT_EQ(LasQueue(NAN, 600), 0);
  EXPECT_EQ(LasQueue(1e300, 600), 63);
}

// A full cluster: a running gang and a waiting one that needs the same nodes. With a little less
// service the waiting job does not take the running one's place (in short rounds the two would
// swap every few rounds, each swap a restart); once the running one is a queue further, it does.
TEST(GoodputPolicyTest, AWaitingJobWithALittleLessServiceDoesNotPreemptARunningOne) {
  ClusterSnapshot s = Cluster(1, 4);
  LinearModel linear;
  JobRequest running = Gpus("running", 4, {"n0", "n0", "n0", "n0"});
  running.submitted_ms = 1000;
  running.attained_service = 400;
  running.model = &linear;
  JobRequest waiting = Gpus("waiting", 4);
  waiting.submitted_ms = 2000;
  waiting.attained_service = 100;  // it ran before, and was preempted
  waiting.model = &linear;
  s.jobs = {waiting, running};
  Hold(s);
  GoodputPolicy policy;
  Decisions d = policy.Schedule(s);
  EXPECT_TRUE(d.preempted.empty());
  EXPECT_TRUE(d.placements.empty());
  ASSERT_EQ(d.waiting.size(), 1u);
  EXPECT_EQ(d.waiting[0].job_id, "waiting");
  // 700 learner-seconds: queue 1, behind the waiting job's queue 0.
  s.jobs[1].attained_service = 700;
  Decisions later = policy.Schedule(s);
  EXPECT_EQ(later.preempted, std::vector<std::string>{"running"});
}

// Linear goodput with `left` progress to the end and resizes that cost `cost` seconds.
class CostlyModel : public LinearModel {
 public:
  CostlyModel(double left, double cost) : left_(left), cost_(cost) {}
  double RemainingProgress() const override { return left_; }
  double ResizeSeconds() const override { return cost_; }

 private:
  double left_, cost_;
};

// Saved: left × (1/G(from) − 1/G(to)); it pays when that beats the cost.
TEST(PlacementTest, AResizePaysWhenTheTimeItSavesOnTheRestBeatsItsCost) {
  CostlyModel almost_done(10, 5), long_way(100, 5), unknown(0, 5), free_resize(10, 0);
  EXPECT_FALSE(ResizePays(almost_done, 1, 2, 4));  // 10 × (1 − 1/2) = 5: not more than 5
  EXPECT_TRUE(ResizePays(almost_done, 1, 4, 4));   // 7.5
  EXPECT_TRUE(ResizePays(long_way, 1, 2, 4));      // 50
  EXPECT_FALSE(ResizePays(long_way, 2, 1, 4));     // slower: never worth it
  EXPECT_TRUE(ResizePays(unknown, 1, 2, 4));       // nothing to weigh
  EXPECT_TRUE(ResizePays(free_resize, 1, 2, 4));
}

// weftd's rounds (learners leave nodes only when they exit): an elastic job is grown in place —
// its learner stays first, on its node, the new ones follow — and shrunk in place to a prefix of
// its learners, whose leaver holds its node this round, so the job it made room for starts in
// the next one. Nothing is preempted.
TEST(GoodputPolicyTest, InWeftdAnElasticJobIsGrownAndShrunkInPlace) {
  ClusterSnapshot s = Cluster(2, 2);
  s.preemption_frees_at_once = false;
  CostlyModel model(1e6, 1);
  JobRequest e = Gpus("e", 1, {"n1"});
  e.max_learners = 4;
  e.model = &model;
  e.attained_service = 100;
  s.jobs = {e};
  Hold(s);
  GoodputPolicy policy;
  Decisions d = policy.Schedule(s);
  EXPECT_TRUE(d.preempted.empty());
  ASSERT_EQ(d.placements.size(), 1u);
  EXPECT_EQ(d.placements[0].learner_nodes, (std::vector<std::string>{"n1", "n1", "n0", "n0"}));
  EXPECT_EQ(d.placements[0].reason,
            "grow to 4: the goodput policy's speedup gain is worth the resize");
  EXPECT_TRUE(CheckDecisions(s, d, {/*preemption_frees_at_once=*/false, true}).ok());
  Apply(s, d);

  s.jobs.push_back(Gpus("w", 1));  // rigid, no service yet
  d = policy.Schedule(s);
  EXPECT_TRUE(d.preempted.empty());
  ASSERT_EQ(d.placements.size(), 1u);
  EXPECT_EQ(d.placements[0].job_id, "e");
  EXPECT_EQ(d.placements[0].learner_nodes, (std::vector<std::string>{"n1", "n1", "n0"}));
  EXPECT_EQ(d.placements[0].reason,
            "shrink to 3: the goodput policy's sizing by measured speedup, against the other "
            "jobs'");
  ASSERT_NE(WaitingOf(d, "w"), nullptr);
  EXPECT_EQ(WaitingOf(d, "w")->code, WaitCode::kPreempting);
  EXPECT_EQ(WaitingOf(d, "w")->reason, "waiting: running jobs are shrinking to make room for it");
  EXPECT_TRUE(CheckDecisions(s, d, {/*preemption_frees_at_once=*/false, true}).ok());
  Apply(s, d);  // the leaver has exited
  d = policy.Schedule(s);
  ASSERT_EQ(d.placements.size(), 1u);
  EXPECT_EQ(d.placements[0].job_id, "w");
  EXPECT_EQ(d.placements[0].learner_nodes, (std::vector<std::string>{"n0"}));
}

// A running job near its end is not grown for a saving smaller than the resize's cost; a waiting
// job is started at any size (it pays no resize).
TEST(GoodputPolicyTest, ARunningJobIsNotGrownForLessThanTheResizeCosts) {
  ClusterSnapshot s = Cluster(1, 4);
  s.preemption_frees_at_once = false;
  CostlyModel enough(3, 2);  // 1 → 4 learners saves 3 × (1 − 1/4) = 2.25 s, more than 2
  JobRequest a = Gpus("a", 1, {"n0"});
  a.max_learners = 4;
  a.model = &enough;
  s.jobs = {a};
  Hold(s);
  GoodputPolicy policy;
  Decisions d = policy.Schedule(s);
  ASSERT_EQ(d.placements.size(), 1u);
  EXPECT_EQ(d.placements[0].learner_nodes.size(), 4u);
  CostlyModel too_little(2, 2);  // 1.5 s
  s.jobs[0].model = &too_little;
  d = policy.Schedule(s);
  EXPECT_TRUE(d.placements.empty());
  EXPECT_TRUE(d.preempted.empty());
  JobRequest fresh = Gpus("fresh", 1);
  fresh.max_learners = 4;
  fresh.model = &too_little;
  s.jobs = {fresh};
  Hold(s);
  d = policy.Schedule(s);
  ASSERT_EQ(d.placements.size(), 1u);
  EXPECT_EQ(d.placements[0].learner_nodes.size(), 4u);
}

// Linear goodput, `left` progress to the deliver target: `left` seconds to delivery on one learner.
class TargetModel : public LinearModel {
 public:
  explicit TargetModel(double left) : left_(left) {}
  double ProgressToDeliver() const override { return left_; }

 private:
  double left_;
};

JobRequest Targeted(const std::string& id, TargetState target, const JobModel* model,
                    std::vector<std::string> alloc = {}) {
  JobRequest j = Gpus(id, 1, std::move(alloc));
  j.target = target;
  j.model = model;
  return j;
}

TEST(TargetsPolicyTest, TheJobClosestToItsDeliverTargetGoesFirstAndDeliveredOnesLast) {
  ClusterSnapshot s = Cluster(1, 1);
  TargetModel far(1000), near(10), done(0);
  s.jobs = {Targeted("delivered", TargetState::kDelivered, &done),
            Targeted("none", TargetState::kNone, &done),
            Targeted("far", TargetState::kBeforeDeliver, &far),
            Targeted("near", TargetState::kBeforeDeliver, &near)};
  TargetsPolicy policy;
  Decisions d = policy.Schedule(s);
  Apply(s, d);
  EXPECT_EQ(s.jobs[3].allocation.size(), 1u);  // near
  for (int i : {0, 1, 2}) EXPECT_TRUE(s.jobs[i].allocation.empty()) << s.jobs[i].job_id;
  ASSERT_NE(WaitingOf(d, "far"), nullptr);
  EXPECT_EQ(WaitingOf(d, "far")->reason, "waiting: 1 undelivered job is closer to its target");
  EXPECT_EQ(WaitingOf(d, "far")->code, WaitCode::kOutranked);
  ASSERT_NE(WaitingOf(d, "delivered"), nullptr);
  EXPECT_EQ(WaitingOf(d, "delivered")->reason,
            "waiting: delivered; jobs that have not reached their deliver target come first");
}

TEST(TargetsPolicyTest, ADeliveredJobIsPreemptedForAnUndeliveredOne) {
  ClusterSnapshot s = Cluster(1, 2);
  TargetModel done(0), a(50), b(60);
  s.jobs = {Targeted("delivered", TargetState::kDelivered, &done, {"n0", "n0"}),
            Targeted("a", TargetState::kBeforeDeliver, &a),
            Targeted("b", TargetState::kBeforeDeliver, &b)};
  s.jobs[0].max_learners = 2;
  Hold(s);
  TargetsPolicy policy;
  Decisions d = policy.Schedule(s);
  EXPECT_EQ(d.preempted, std::vector<std::string>{"delivered"});
  Apply(s, d);
  EXPECT_EQ(s.jobs[1].allocation.size(), 1u);
  EXPECT_EQ(s.jobs[2].allocation.size(), 1u);
  // Once they are delivered too they keep their learners: a running delivered job is not
  // preempted for a delivered peer with less attained service (each swap would be a restart).
  s.jobs[1].target = s.jobs[2].target = TargetState::kDelivered;
  s.jobs[1].attained_service = s.jobs[2].attained_service = 100;
  Decisions again = policy.Schedule(s);
  EXPECT_TRUE(again.preempted.empty());
  Apply(s, again);
  EXPECT_TRUE(s.jobs[0].Waiting());
  // When one of them ends, the first delivered job is back.
  s.jobs.erase(s.jobs.begin() + 1);
  Hold(s);
  Apply(s, policy.Schedule(s));
  EXPECT_EQ(s.jobs[0].allocation.size(), 1u);
  for (auto [node, n] : Used(s)) EXPECT_LE(n, 2) << node;
}

// A job before its target is preempted for a waiting one only when that one is estimated clearly
// closer (by more than 1 + keep_bonus = 3 times): estimates from noisy curves move, and each swap
// is a checkpoint and a restart.
TEST(TargetsPolicyTest, ARunningJobBeforeItsTargetYieldsOnlyToAClearlyCloserOne) {
  ClusterSnapshot s = Cluster(1, 1);
  TargetModel running(100), somewhat(50), much(20);
  s.jobs = {Targeted("running", TargetState::kBeforeDeliver, &running, {"n0"}),
            Targeted("somewhat", TargetState::kBeforeDeliver, &somewhat)};
  Hold(s);
  TargetsPolicy policy;
  Decisions d = policy.Schedule(s);
  EXPECT_TRUE(d.preempted.empty());
  ASSERT_NE(WaitingOf(d, "somewhat"), nullptr);
  s.jobs[1] = Targeted("much", TargetState::kBeforeDeliver, &much);
  d = policy.Schedule(s);
  EXPECT_EQ(d.preempted, std::vector<std::string>{"running"});
  ASSERT_EQ(d.placements.size(), 1u);
  EXPECT_EQ(d.placements[0].job_id, "much");
}

// weftd's rounds: a preempted job holds its nodes until its learners have checkpointed and
// exited, so the job it made room for waits (kPreempting) and starts in a later round; a rigid
// job's shrink is a preemption there, and it never grows.
TEST(TargetsPolicyTest, InWeftdAPreemptedJobsNodesAreFreeOnlyOnceItHasGone) {
  ClusterSnapshot s = Cluster(1, 1);
  s.preemption_frees_at_once = false;
  TargetModel done(0), a(50);
  s.jobs = {Targeted("delivered", TargetState::kDelivered, &done, {"n0"}),
            Targeted("a", TargetState::kBeforeDeliver, &a)};
  Hold(s);
  TargetsPolicy policy;
  Decisions d = policy.Schedule(s);
  EXPECT_EQ(d.preempted, std::vector<std::string>{"delivered"});
  EXPECT_TRUE(d.placements.empty());
  EXPECT_TRUE(CheckDecisions(s, d, {/*preemption_frees_at_once=*/false, true}).ok());
  ASSERT_EQ(d.preempt_reasons.count("delivered"), 1u);
  EXPECT_THAT(d.preempt_reasons.at("delivered"), ::testing::HasSubstr("delivered"));
  const auto wait = std::find_if(d.waiting.begin(), d.waiting.end(),
                                 [](const Waiting& w) { return w.job_id == "a"; });
  ASSERT_NE(wait, d.waiting.end());
  EXPECT_EQ(wait->code, WaitCode::kPreempting);
  // weftd takes the preempted job out of the round while it checkpoints; once it has exited its
  // node is free and the waiting job starts.
  s.jobs.erase(s.jobs.begin());
  Hold(s);
  d = policy.Schedule(s);
  ASSERT_EQ(d.placements.size(), 1u);
  EXPECT_EQ(d.placements[0].job_id, "a");
}

TEST(TargetsPolicyTest, InWeftdAnElasticJobBeforeItsTargetGrowsInPlace) {
  ClusterSnapshot s = Cluster(1, 2);
  s.preemption_frees_at_once = false;
  TargetModel a(50);
  s.jobs = {Targeted("a", TargetState::kBeforeDeliver, &a, {"n0"})};
  s.jobs[0].max_learners = 2;
  Hold(s);
  TargetsPolicy policy;
  Decisions d = policy.Schedule(s);
  EXPECT_TRUE(d.preempted.empty());
  ASSERT_EQ(d.placements.size(), 1u);
  EXPECT_EQ(d.placements[0].learner_nodes, (std::vector<std::string>{"n0", "n0"}));
  EXPECT_EQ(d.placements[0].reason,
            "grow to 2: the targets policy's speedup gain is worth the resize");
}

TEST(TargetsPolicyTest, TargetsOrderJobsInsideEachTenantsFairShareAndQuota) {
  ClusterSnapshot s = Cluster(1, 4);
  s.tenants["a"].weight = 1;
  s.tenants["b"].weight = 1;
  s.tenants["c"].has_quota = true;
  s.tenants["c"].quota.gpus = 1;
  TargetModel near(1), far(1000);
  // Tenant a's three jobs are all closer to their targets than b's, and c's two closer still:
  // a gets no more than its fair share while b waits; c no more than its quota.
  std::vector<JobRequest> jobs = {Targeted("a1", TargetState::kBeforeDeliver, &near),
                                  Targeted("a2", TargetState::kBeforeDeliver, &near),
                                  Targeted("a3", TargetState::kBeforeDeliver, &near),
                                  Targeted("b1", TargetState::kBeforeDeliver, &far),
                                  Targeted("c1", TargetState::kBeforeDeliver, &near),
                                  Targeted("c2", TargetState::kBeforeDeliver, &near)};
  for (auto& j : jobs) {
    j.tenant = j.job_id.substr(0, 1);
    j.max_learners = 4;
  }
  s.jobs = jobs;
  TargetsPolicy policy;
  Decisions d = policy.Schedule(s);
  Apply(s, d);
  std::map<std::string, int> by_tenant;
  for (const auto& j : s.jobs) by_tenant[j.tenant] += static_cast<int>(j.allocation.size());
  EXPECT_EQ(by_tenant["b"], 1) << "b's fair share is not a's to take";
  EXPECT_EQ(by_tenant["c"], 1) << "c's quota";
  EXPECT_EQ(by_tenant["a"], 2);
  ASSERT_NE(WaitingOf(d, "c2"), nullptr);
  EXPECT_EQ(WaitingOf(d, "c2")->code, WaitCode::kQuota);
  for (auto [node, n] : Used(s)) EXPECT_LE(n, 4) << node;
}

}  // namespace
}  // namespace weft::scheduler
