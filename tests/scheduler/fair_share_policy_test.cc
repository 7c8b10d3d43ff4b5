// weft's multi-tenant policy: weighted DRF shares, quotas, gangs, pack/spread, backfill with a
// reservation, preemption, and the reasons people read.
#include "scheduler/fair_share_policy.h"

#include <map>
#include <random>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/decision_check.h"

namespace weft::scheduler {
namespace {

ClusterSnapshot Cluster(int nodes, double cpus, int64_t memory_mb, int gpus = 0) {
  ClusterSnapshot s;
  for (int n = 0; n < nodes; ++n) {
    Node node;
    node.name = "n" + std::to_string(n);
    node.capacity = {cpus, memory_mb, gpus};
    s.nodes.push_back(node);
  }
  return s;
}

JobRequest Job(const std::string& id, const std::string& tenant, int learners, Resources per,
               int priority = 0, TimeMs submitted = 0) {
  JobRequest j;
  j.job_id = id;
  j.tenant = tenant;
  j.learners = j.min_learners = j.max_learners = learners;
  j.per_learner = per;
  j.priority = priority;
  j.submitted_ms = submitted;
  return j;
}

// An elastic job of `min` to `max` learners.
JobRequest Elastic(const std::string& id, const std::string& tenant, int min, int max,
                   Resources per, int priority = 0, TimeMs submitted = 0) {
  JobRequest j = Job(id, tenant, max, per, priority, submitted);
  j.min_learners = min;
  return j;
}

// Applies decisions and recomputes node allocations, as weftd or weft-sim would. Every round
// must pass weftd's own check: preempted jobs keep their nodes until they exit; resizes only
// where `resizes` allows them.
void Apply(ClusterSnapshot& s, const Decisions& d, bool resizes = false) {
  absl::Status ok = CheckDecisions(s, d,
                                   {/*preemption_frees_at_once=*/false,
                                    /*allow_resize=*/resizes});
  EXPECT_TRUE(ok.ok()) << ok;
  for (auto& j : s.jobs) {
    for (const auto& id : d.preempted) {
      if (id == j.job_id) j.allocation.clear();
    }
    for (const auto& p : d.placements) {
      if (p.job_id == j.job_id) j.allocation = p.learner_nodes;
    }
  }
  for (auto& n : s.nodes) n.allocated = {};
  for (const auto& j : s.jobs) {
    for (const auto& name : j.allocation) {
      for (auto& n : s.nodes) {
        if (n.name == name) n.allocated += j.per_learner;
      }
    }
  }
}

std::string ReasonFor(const Decisions& d, const std::string& id) {
  for (const auto& w : d.waiting) {
    if (w.job_id == id) return absl::StrCat(WaitCodeName(w.code), ": ", w.reason);
  }
  return "";
}

void ExpectNoNodeOverCommitted(const ClusterSnapshot& s) {
  for (const auto& n : s.nodes) {
    EXPECT_TRUE(n.capacity.Fits(n.allocated)) << n.name << " over-committed";
  }
}

TEST(FairSharePolicyTest, WeightedDrfSharesStayWithinFivePercentOfIdealOverALongRandomRun) {
  // Three tenants with endless backlogs of different shapes (CPU-heavy, memory-heavy, mixed) and
  // weights 1, 2, 1 on 8 nodes; random jobs finish every round. Weighted DRF equalises
  // dominant share / weight, so the ideal dominant shares are 1/4, 1/2, 1/4 of what they hold.
  ClusterSnapshot s = Cluster(8, 16, 64 * 1024);
  s.tenants["a"].weight = 1;
  s.tenants["b"].weight = 2;
  s.tenants["c"].weight = 1;
  const std::map<std::string, Resources> shape = {
      {"a", {2, 1024, 0}}, {"b", {1, 6 * 1024, 0}}, {"c", {1, 2048, 0}}};
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> gang(1, 3);
  FairSharePolicy policy;
  Resources total{8 * 16.0, 8 * 64 * 1024, 0};
  std::map<std::string, double> share_sum;
  int next_id = 0, rounds = 0;
  for (int round = 0; round < 2000; ++round) {
    // Keep 30 jobs waiting per tenant: every tenant always has more demand than its share.
    for (const auto& [t, per] : shape) {
      int waiting = 0;
      for (const auto& j : s.jobs) waiting += j.tenant == t && j.Waiting();
      for (; waiting < 30; ++waiting)
        s.jobs.push_back(Job("j" + std::to_string(next_id++), t, gang(rng), per));
    }
    s.now_ms = round * 1000;
    Decisions d = policy.Schedule(s);
    Apply(s, d);
    ExpectNoNodeOverCommitted(s);
    // Measure after the first rounds have filled the cluster.
    if (round >= 100) {
      std::map<std::string, Resources> used;
      for (const auto& j : s.jobs) used[j.tenant] += j.per_learner.Times(j.allocation.size());
      for (const auto& [t, w] : s.tenants) share_sum[t] += DominantShare(used[t], total, w.weight);
      ++rounds;
    }
    // About one running job in six finishes.
    std::vector<JobRequest> kept;
    for (auto& j : s.jobs) {
      if (!j.Waiting() && rng() % 6 == 0) continue;
      kept.push_back(j);
    }
    s.jobs = kept;
    Apply(s, {});
  }
  double mean = 0;
  for (const auto& [t, sum] : share_sum) mean += sum / rounds / share_sum.size();
  for (const auto& [t, sum] : share_sum) {
    double weighted = sum / rounds;
    std::cout << "tenant " << t << ": mean weighted dominant share " << weighted << " (ideal "
              << mean << ", error " << 100 * (weighted - mean) / mean << " %)\n";
    EXPECT_NEAR(weighted, mean, 0.05 * mean) << t;
  }
  EXPECT_GT(mean, 0.2);  // the cluster was actually used
}

TEST(FairSharePolicyTest, QuotaIsNeverExceededAndTheReasonNamesTheResource) {
  ClusterSnapshot s = Cluster(2, 8, 16384);
  s.tenants["a"].has_quota = true;
  s.tenants["a"].quota = {4, 16384, 0};
  s.jobs = {Job("a1", "a", 2, {1, 1024}), Job("a2", "a", 2, {1, 1024}),
            Job("a3", "a", 1, {1, 1024})};
  FairSharePolicy policy;
  Decisions d = policy.Schedule(s);
  Apply(s, d);
  double cpus = 0;
  for (const auto& j : s.jobs) cpus += j.per_learner.cpus * j.allocation.size();
  EXPECT_EQ(cpus, 4);
  EXPECT_TRUE(s.jobs[2].Waiting());
  EXPECT_EQ(ReasonFor(d, "a3"), "quota: waiting: tenant quota cpus 4/4");
}

TEST(FairSharePolicyTest, GangsAreAllOrNothingAndPackOrSpreadAsAsked) {
  ClusterSnapshot s = Cluster(4, 4, 8192);
  JobRequest pack = Job("pack", "t", 4, {1, 1024});
  JobRequest spread = Job("spread", "t", 4, {1, 1024});
  spread.spread = true;
  JobRequest big = Job("big", "t", 9, {1, 1024});  // 9 > the 8 cpus left
  s.jobs = {pack, spread, big};
  FairSharePolicy policy;
  Decisions d = policy.Schedule(s);
  Apply(s, d);
  std::set<std::string> pack_nodes(s.jobs[0].allocation.begin(), s.jobs[0].allocation.end());
  std::set<std::string> spread_nodes(s.jobs[1].allocation.begin(), s.jobs[1].allocation.end());
  EXPECT_EQ(s.jobs[0].allocation.size(), 4u);
  EXPECT_EQ(pack_nodes.size(), 1u);    // fewest nodes
  EXPECT_EQ(spread_nodes.size(), 3u);  // most nodes: the 3 with room
  EXPECT_TRUE(s.jobs[2].Waiting());    // none of its learners started
  EXPECT_EQ(
      ReasonFor(d, "big").rfind("no_room: waiting: no node set fits 9 learners × 1 cpus (pack)", 0),
      0u)
      << ReasonFor(d, "big");
}

TEST(FairSharePolicyTest, AOneNodeGangWaitsForANodeThatHoldsItWhole) {
  // 3 learners of 2 cpus: 6 cpus fit over two nodes of 4, never on one. A parameter-server job
  // (one_node) waits; the same gang packed would start.
  ClusterSnapshot s = Cluster(2, 4, 8192);
  JobRequest ps = Job("ps", "t", 3, {2, 1024});
  ps.one_node = true;
  s.jobs = {ps};
  FairSharePolicy policy;
  Decisions d = policy.Schedule(s);
  EXPECT_TRUE(d.placements.empty());
  EXPECT_EQ(ReasonFor(d, "ps").rfind(
                "no_room: waiting: no node set fits 3 learners × 2 cpus (one node)", 0),
            0u)
      << ReasonFor(d, "ps");
  s.jobs[0].one_node = false;
  EXPECT_EQ(policy.Schedule(s).placements.size(), 1u);
  // Two of them fit on one node, and both go there.
  s.jobs = {Job("ps2", "t", 2, {2, 1024})};
  s.jobs[0].one_node = true;
  d = policy.Schedule(s);
  ASSERT_EQ(d.placements.size(), 1u);
  EXPECT_EQ(d.placements[0].learner_nodes[0], d.placements[0].learner_nodes[1]);
}

TEST(FairSharePolicyTest, ALargeGangIsNotStarvedByAStreamOfSmallJobs) {
  // 2 nodes × 4 cpus, busy with small jobs; a 4-learner gang arrives and then a small job every
  // round. Without a reservation the small ones would take every cpu that frees up.
  ClusterSnapshot s = Cluster(2, 4, 8192);
  FairSharePolicy policy;
  int next = 0;
  for (int k = 0; k < 8; ++k, ++next) {
    s.jobs.push_back(Job("s" + std::to_string(next), "t", 1, {1, 512}, 0, next + 1));
  }
  Apply(s, policy.Schedule(s));
  s.jobs.push_back(Job("gang", "t", 4, {1, 512}, 0, 1000));
  std::mt19937 rng(3);
  bool started = false;
  for (int round = 0; round < 50 && !started; ++round) {
    s.jobs.push_back(Job("s" + std::to_string(next++), "t", 1, {1, 512}, 0, 2000 + round));
    Decisions d = policy.Schedule(s);
    Apply(s, d);
    ExpectNoNodeOverCommitted(s);
    for (const auto& j : s.jobs) started = started || (j.job_id == "gang" && !j.Waiting());
    // One running small job finishes per round.
    for (auto it = s.jobs.begin(); it != s.jobs.end(); ++it) {
      if (it->job_id != "gang" && !it->Waiting()) {
        s.jobs.erase(it);
        break;
      }
    }
    Apply(s, {});
  }
  EXPECT_TRUE(started) << "the gang never started";
}

TEST(FairSharePolicyTest, AReservationIsNamedOnlyToItsOwnTenant) {
  ClusterSnapshot s = Cluster(1, 4, 8192);
  FairSharePolicy policy;
  // Tenant b holds nothing, so its job comes first, finds no room and reserves the node.
  s.jobs = {Job("running", "a", 1, {3, 512}, 0, 1), Job("theirs", "b", 1, {2, 512}, 0, 2),
            Job("mine", "a", 1, {2, 512}, 0, 3), Job("theirs-too", "b", 1, {2, 512}, 0, 4)};
  s.explain = true;
  Apply(s, policy.Schedule(s));
  Decisions d = policy.Schedule(s);
  EXPECT_THAT(ReasonFor(d, "theirs"), ::testing::HasSubstr("nodes reserved for it"));
  EXPECT_THAT(ReasonFor(d, "mine"), ::testing::HasSubstr("reserved for a job of another tenant"));
  EXPECT_THAT(ReasonFor(d, "theirs-too"), ::testing::HasSubstr("reserved for theirs"));
}

TEST(FairSharePolicyTest, HigherPriorityJobPreemptsTheLowestPriorityYoungestJobOfItsTenant) {
  ClusterSnapshot s = Cluster(1, 4, 8192);
  s.jobs = {Job("low-old", "t", 2, {1, 1024}, -100, 1),
            Job("low-young", "t", 2, {1, 1024}, -100, 2)};
  FairSharePolicy policy;
  Apply(s, policy.Schedule(s));
  s.jobs.push_back(Job("urgent", "t", 2, {1, 1024}, 100, 3));
  Decisions d = policy.Schedule(s);
  EXPECT_EQ(d.preempted, std::vector<std::string>{"low-young"});
  EXPECT_EQ(ReasonFor(d, "urgent"), "preempting: waiting: preempting 1 job to make room");
  Apply(s, d);
  Decisions next = policy.Schedule(s);
  Apply(s, next);
  EXPECT_EQ(s.jobs[2].allocation.size(), 2u);  // urgent runs in the next round
  EXPECT_TRUE(s.jobs[1].Waiting());            // low-young back in the queue, not failed
  EXPECT_EQ(s.jobs[0].allocation.size(), 2u);  // low-old untouched
}

TEST(FairSharePolicyTest, ATenantBelowItsFairSharePreemptsAnOverShareTenantButNotTheReverse) {
  ClusterSnapshot s = Cluster(1, 4, 8192);
  s.jobs = {Job("a1", "a", 1, {1, 1024}, 0, 1), Job("a2", "a", 1, {1, 1024}, 0, 2),
            Job("a3", "a", 1, {1, 1024}, 0, 3), Job("a4", "a", 1, {1, 1024}, 0, 4)};
  FairSharePolicy policy;
  Apply(s, policy.Schedule(s));  // a takes the whole node
  s.jobs.push_back(Job("b1", "b", 2, {1, 1024}, 0, 5));
  Decisions d = policy.Schedule(s);
  // b (0 %) is below its fair share (50 %), a (100 %) above: two of a's youngest jobs go.
  EXPECT_EQ(d.preempted, (std::vector<std::string>{"a4", "a3"}));
  Apply(s, d);
  Apply(s, policy.Schedule(s));
  EXPECT_EQ(s.jobs[4].allocation.size(), 2u);
  // Now both hold 50 %: nobody preempts anybody.
  Decisions calm = policy.Schedule(s);
  EXPECT_TRUE(calm.preempted.empty());
}

TEST(FairSharePolicyTest, BehindHigherPriorityJobsIsTheReasonForLowerOnes) {
  ClusterSnapshot s = Cluster(1, 2, 4096);
  s.jobs = {Job("big-high", "t", 4, {1, 512}, 100), Job("big-low", "t", 3, {1, 512}, 0)};
  FairSharePolicy policy;
  Decisions d = policy.Schedule(s);
  EXPECT_EQ(ReasonFor(d, "big-low"), "priority: waiting: behind 1 higher-priority job");
}

const Placement* PlacementOf(const Decisions& d, const std::string& id) {
  for (const Placement& p : d.placements) {
    if (p.job_id == id) return &p;
  }
  return nullptr;
}

TEST(FairSharePolicyTest, AnElasticJobStartsAtItsMinimumAndGrowsIntoWhatNoWaitingJobCanUse) {
  ClusterSnapshot s = Cluster(4, 1, 4096);
  s.jobs = {Elastic("e", "a", 1, 4, {1, 1024}, 0, 1), Job("gang", "b", 2, {1, 1024}, 0, 2)};
  FairSharePolicy policy;
  Decisions d = policy.Schedule(s);
  // Both start in the same round: the gang gets its 2, the elastic job its 1 and then the one
  // node left; it never takes what the gang needed.
  ASSERT_NE(PlacementOf(d, "gang"), nullptr);
  ASSERT_NE(PlacementOf(d, "e"), nullptr);
  EXPECT_EQ(PlacementOf(d, "gang")->learner_nodes.size(), 2u);
  EXPECT_EQ(PlacementOf(d, "e")->learner_nodes.size(), 2u);
  EXPECT_EQ(PlacementOf(d, "e")->reason, "") << "a start, not a resize";
  Apply(s, d);
  ExpectNoNodeOverCommitted(s);
  EXPECT_TRUE(policy.Schedule(s).placements.empty()) << "a full cluster: nothing to grow into";
}

TEST(FairSharePolicyTest, ARunningElasticJobGrowsKeepingItsRanksWhereTheyAre) {
  ClusterSnapshot s = Cluster(3, 1, 4096);
  s.jobs = {Elastic("e", "a", 1, 3, {1, 1024}, 0, 1), Job("other", "b", 1, {1, 1024}, 0, 2)};
  s.jobs[0].allocation = {"n1"};
  s.jobs[1].allocation = {"n0"};
  s.nodes[0].allocated = s.nodes[1].allocated = {1, 1024};
  s.jobs.push_back(Job("late", "b", 1, {1, 1024}, 0, 3));  // waiting: offered the room first
  FairSharePolicy policy;
  Decisions d = policy.Schedule(s);
  ASSERT_NE(PlacementOf(d, "late"), nullptr);
  EXPECT_EQ(PlacementOf(d, "e"), nullptr) << "no room left to grow into";
  Apply(s, d);
  s.jobs.pop_back();  // late and other finish
  s.jobs.pop_back();
  Apply(s, {});
  d = policy.Schedule(s);
  const Placement* grow = PlacementOf(d, "e");
  ASSERT_NE(grow, nullptr);
  EXPECT_EQ(grow->learner_nodes, (std::vector<std::string>{"n1", "n0", "n2"}));
  EXPECT_EQ(grow->reason, "grow to 3: idle capacity");
  Apply(s, d, /*resizes=*/true);
  EXPECT_TRUE(policy.Schedule(s).placements.empty()) << "at its maximum";
}

TEST(FairSharePolicyTest, ElasticJobsShrinkBeforeAnyJobIsPreemptedAndTheReasonSaysWhy) {
  ClusterSnapshot s = Cluster(3, 1, 4096);
  s.jobs = {Elastic("e", "a", 1, 3, {1, 1024}, 0, 1)};
  FairSharePolicy policy;
  Apply(s, policy.Schedule(s));
  ASSERT_EQ(s.jobs[0].allocation.size(), 3u);
  s.jobs.push_back(Job("b1", "b", 1, {1, 1024}, 0, 2));
  Decisions d = policy.Schedule(s);
  EXPECT_TRUE(d.preempted.empty());
  const Placement* shrink = PlacementOf(d, "e");
  ASSERT_NE(shrink, nullptr);
  EXPECT_EQ(shrink->learner_nodes, (std::vector<std::string>{"n0", "n1"})) << "last rank goes";
  EXPECT_EQ(shrink->reason, "shrink to 2: another tenant is below its fair share");
  EXPECT_EQ(ReasonFor(d, "b1"), "preempting: waiting: shrinking 1 job to make room");
  EXPECT_EQ(PlacementOf(d, "b1"), nullptr) << "it starts once the learner has left";
  Apply(s, d, /*resizes=*/true);
  d = policy.Schedule(s);
  ASSERT_NE(PlacementOf(d, "b1"), nullptr);
  EXPECT_EQ(PlacementOf(d, "b1")->learner_nodes, std::vector<std::string>{"n2"});
  EXPECT_EQ(PlacementOf(d, "e"), nullptr) << "no growing back into the room it just gave";
  Apply(s, d, /*resizes=*/true);
  Decisions calm = policy.Schedule(s);  // a 2/3, b 1/3: b is not below a to take more
  EXPECT_TRUE(calm.placements.empty() && calm.preempted.empty());
  s.jobs.pop_back();  // b1 finishes: e grows back
  Apply(s, {});
  d = policy.Schedule(s);
  ASSERT_NE(PlacementOf(d, "e"), nullptr);
  EXPECT_EQ(PlacementOf(d, "e")->learner_nodes.size(), 3u);
}

TEST(FairSharePolicyTest, AnElasticJobIsNeverShrunkBelowItsMinimum) {
  ClusterSnapshot s = Cluster(3, 1, 4096);
  s.jobs = {Elastic("e", "a", 2, 3, {1, 1024}, 0, 1)};
  FairSharePolicy policy;
  Apply(s, policy.Schedule(s));
  ASSERT_EQ(s.jobs[0].allocation.size(), 3u);
  // b needs 2: shrinking e to its minimum frees only 1, and preempting e whole would leave a
  // (0) below b (2/3), so nothing happens and b waits.
  s.jobs.push_back(Job("b2", "b", 2, {1, 1024}, 0, 2));
  Decisions d = policy.Schedule(s);
  EXPECT_TRUE(d.placements.empty());
  EXPECT_TRUE(d.preempted.empty());
  EXPECT_THAT(ReasonFor(d, "b2"), ::testing::StartsWith("no_room: waiting: no node set fits 2"));
  // A job of b that needs one learner gets it by a shrink to e's minimum.
  s.jobs.back() = Job("b1", "b", 1, {1, 1024}, 0, 2);
  d = policy.Schedule(s);
  ASSERT_NE(PlacementOf(d, "e"), nullptr);
  EXPECT_EQ(PlacementOf(d, "e")->learner_nodes.size(), 2u);
}

TEST(FairSharePolicyTest, AHigherPriorityJobShrinksAnElasticJobOfItsTenantFirst) {
  ClusterSnapshot s = Cluster(4, 1, 4096);
  s.jobs = {Job("fixed-low", "t", 1, {1, 1024}, -100, 1),
            Elastic("e-low", "t", 1, 3, {1, 1024}, -100, 2)};
  FairSharePolicy policy;
  Apply(s, policy.Schedule(s));
  ASSERT_EQ(s.jobs[1].allocation.size(), 3u);
  s.jobs.push_back(Job("urgent", "t", 2, {1, 1024}, 100, 3));
  Decisions d = policy.Schedule(s);
  EXPECT_TRUE(d.preempted.empty()) << "the fixed job is younger-first, but shrinks come first";
  ASSERT_NE(PlacementOf(d, "e-low"), nullptr);
  EXPECT_EQ(PlacementOf(d, "e-low")->learner_nodes.size(), 1u);
  EXPECT_EQ(PlacementOf(d, "e-low")->reason,
            "shrink to 1: a higher-priority job of its tenant needs room");
}

TEST(FairSharePolicyTest, GrowthStaysWithinTheTenantsQuotaAndWaitingReasonsNameTheRange) {
  ClusterSnapshot s = Cluster(4, 1, 4096);
  s.tenants["a"].has_quota = true;
  s.tenants["a"].quota = {2, 100000, 0};
  s.jobs = {Elastic("e", "a", 1, 4, {1, 1024}, 0, 1)};
  FairSharePolicy policy;
  Decisions d = policy.Schedule(s);
  ASSERT_NE(PlacementOf(d, "e"), nullptr);
  EXPECT_EQ(PlacementOf(d, "e")->learner_nodes.size(), 2u);
  ClusterSnapshot small = Cluster(1, 1, 4096);
  small.jobs = {Elastic("big", "a", 2, 4, {1, 1024}, 0, 1)};
  d = policy.Schedule(small);
  EXPECT_EQ(ReasonFor(d, "big"),
            "no_room: waiting: no node set fits 2 learners (elastic, 2 to 4) × 1 cpus (pack), "
            "nodes reserved for it");
}

TEST(FairSharePolicyTest, WhatAnElasticJobGrewIntoGoesBackToAWaitingJobOfItsOwnTenant) {
  ClusterSnapshot s = Cluster(3, 1, 4096);
  s.jobs = {Elastic("e", "a", 1, 3, {1, 1024}, 0, 1)};
  FairSharePolicy policy;
  Apply(s, policy.Schedule(s));
  ASSERT_EQ(s.jobs[0].allocation.size(), 3u);
  // Same tenant, same priority: no preemption would be allowed, but the learners above e's
  // minimum were idle capacity, and a waiting job may have them back.
  s.jobs.push_back(Job("next", "a", 2, {1, 1024}, 0, 2));
  Decisions d = policy.Schedule(s);
  ASSERT_NE(PlacementOf(d, "e"), nullptr);
  EXPECT_EQ(PlacementOf(d, "e")->learner_nodes.size(), 1u);
  EXPECT_EQ(PlacementOf(d, "e")->reason,
            "shrink to 1: a waiting job needs the idle capacity it grew into");
  EXPECT_TRUE(d.preempted.empty());
}

TEST(FairSharePolicyTest, ATenantAboveItsShareCannotShrinkAnotherBelowItsOwn) {
  ClusterSnapshot s = Cluster(4, 1, 4096);
  s.jobs = {Job("b-fixed", "b", 2, {1, 1024}, 0, 1), Elastic("e", "a", 1, 2, {1, 1024}, 0, 2)};
  FairSharePolicy policy;
  Apply(s, policy.Schedule(s));
  ASSERT_EQ(s.jobs[1].allocation.size(), 2u);  // a 1/2, b 1/2
  // b wants one more: taking one of e's learners would leave a (1/4) below b (3/4).
  s.jobs.push_back(Job("b-more", "b", 1, {1, 1024}, 0, 3));
  Decisions d = policy.Schedule(s);
  EXPECT_EQ(PlacementOf(d, "e"), nullptr);
  EXPECT_TRUE(d.preempted.empty());
}

}  // namespace
}  // namespace weft::scheduler
