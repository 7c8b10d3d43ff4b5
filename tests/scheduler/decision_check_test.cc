// The one decision checker weftd and weft-sim call: every way a policy can get a round wrong is
// refused with the job or node named, and correct rounds pass.
#include "scheduler/decision_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "scheduler/shares.h"

namespace weft::scheduler {
namespace {

using ::testing::HasSubstr;

// Two nodes of 2 cpus; "run" holds one learner on n0, "wait" wants 2 learners.
ClusterSnapshot Snapshot() {
  ClusterSnapshot s;
  s.nodes = {Node{"n0", {2, 4096, 0}, {1, 1024, 0}, {}, {}}, Node{"n1", {2, 4096, 0}, {}, {}, {}}};
  JobRequest run;
  run.job_id = "run";
  run.tenant = "a";
  run.per_learner = {1, 1024, 0};
  run.allocation = {"n0"};
  JobRequest wait = run;
  wait.job_id = "wait";
  wait.tenant = "b";
  wait.learners = wait.min_learners = wait.max_learners = 2;
  wait.allocation = {};
  s.jobs = {run, wait};
  return s;
}

std::string Refusal(const Decisions& d, const DecisionCheckOptions& o = {}) {
  absl::Status s = CheckDecisions(Snapshot(), d, o);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  return std::string(s.message());
}

TEST(DecisionCheckTest, AGoodRoundPasses) {
  Decisions d;
  d.placements = {{"wait", {"n0", "n1"}, "", {}}};
  EXPECT_TRUE(CheckDecisions(Snapshot(), d).ok());
  EXPECT_TRUE(CheckDecisions(Snapshot(), Decisions{}).ok());
}

TEST(DecisionCheckTest, OverCommitIsRefusedWithTheNodeAndResource) {
  Decisions d;
  d.placements = {{"wait", {"n0", "n0"}, "", {}}};
  EXPECT_THAT(Refusal(d), HasSubstr("over-commits node n0: cpus 3/2"));
}

TEST(DecisionCheckTest, UnknownJobsAndNodesAreRefused) {
  Decisions d;
  d.placements = {{"ghost", {"n1"}, "", {}}};
  EXPECT_THAT(Refusal(d), HasSubstr("places unknown job ghost"));
  d.placements = {{"wait", {"n1", "n9"}, "", {}}};
  EXPECT_THAT(Refusal(d), HasSubstr("unknown node 'n9'"));
  d = {};
  d.preempted = {"ghost"};
  EXPECT_THAT(Refusal(d), HasSubstr("preempts unknown job ghost"));
}

TEST(DecisionCheckTest, AGangGetsTheCountItAsksFor) {
  Decisions d;
  d.placements = {{"wait", {"n1"}, "", {}}};
  EXPECT_THAT(Refusal(d), HasSubstr("gives job wait 1 learners; it asks for 2"));
}

TEST(DecisionCheckTest, ContradictionsAreRefused) {
  Decisions d;
  d.placements = {{"wait", {"n1", "n1"}, "", {}}, {"wait", {"n1", "n1"}, "", {}}};
  EXPECT_THAT(Refusal(d), HasSubstr("places job wait twice"));
  d = {};
  d.preempted = {"wait"};
  EXPECT_THAT(Refusal(d), HasSubstr("preempts job wait, which is waiting"));
  d = {};
  d.preempted = {"run"};
  d.placements = {{"run", {"n1"}, "", {}}};
  EXPECT_THAT(Refusal(d), HasSubstr("both places and preempts job run"));
}

TEST(DecisionCheckTest, PreemptedNodesAreFreeOnlyWhereTheExecutorFreesThemAtOnce) {
  ClusterSnapshot s = Snapshot();
  s.nodes[1].allocated = {2, 2048, 0};  // n1 full with a job the policy does not see
  Decisions d;
  d.preempted = {"run"};
  d.placements = {{"wait", {"n0", "n0"}, "", {}}};
  EXPECT_TRUE(CheckDecisions(s, d, {/*preemption_frees_at_once=*/true, true}).ok());
  absl::Status weftd = CheckDecisions(s, d, {/*preemption_frees_at_once=*/false, true});
  EXPECT_THAT(std::string(weftd.message()), HasSubstr("over-commits node n0"));
}

TEST(DecisionCheckTest, ResizesAreRefusedWhereTheyAreNotSupported) {
  ClusterSnapshot s = Snapshot();
  s.jobs[0].max_learners = 2;
  Decisions d;
  d.placements = {{"run", {"n0", "n1"}, "", {}}};
  EXPECT_TRUE(CheckDecisions(s, d).ok());
  absl::Status weftd = CheckDecisions(s, d, {false, /*allow_resize=*/false});
  EXPECT_THAT(std::string(weftd.message()), HasSubstr("resizes running job run"));
}

TEST(TenantSharesTest, DominantAndFairSharesOverTheTenantsWithWork) {
  ClusterSnapshot s = Snapshot();
  s.tenants["a"].weight = 3;
  s.tenants["idle"].weight = 5;  // no jobs: no fair share, and not in anyone's denominator
  auto shares = ComputeTenantShares(s);
  ASSERT_EQ(shares.size(), 3u);
  EXPECT_DOUBLE_EQ(shares["a"].dominant_share, 0.25);  // 1 of 4 cpus, 1024 of 8192 MiB
  EXPECT_EQ(shares["a"].running_jobs, 1);
  EXPECT_EQ(shares["b"].waiting_jobs, 1);
  EXPECT_DOUBLE_EQ(shares["a"].fair_share, 0.75);  // 3 / (3 + 1): b is unlisted, weight 1
  EXPECT_DOUBLE_EQ(shares["b"].fair_share, 0.25);
  EXPECT_DOUBLE_EQ(shares["idle"].fair_share, 0);
  EXPECT_DOUBLE_EQ(DominantShare({1, 0, 0}, {4, 8192, 0}, 2), 0.125);
}

}  // namespace
}  // namespace weft::scheduler
