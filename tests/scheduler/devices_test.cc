// AssignGpus gives learners device indices after the policy decided counts: never one device to
// two learners, a kept learner keeps its devices, and what a round frees is reused only where
// preemption frees at once (weft-sim), never in weftd's rounds.
#include "scheduler/devices.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "scheduler/decision_check.h"
#include "scheduler/fair_share_policy.h"

namespace weft::scheduler {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Gpus = std::vector<std::vector<int>>;

Node GpuNode(const std::string& name, int gpus) {
  Node n;
  n.name = name;
  n.capacity = {8, 32768, gpus};
  n.gpu_devices = CountedGpus(gpus);
  return n;
}

JobRequest Job(const std::string& id, int learners, int gpus) {
  JobRequest j;
  j.job_id = id;
  j.tenant = "t";
  j.learners = j.min_learners = j.max_learners = learners;
  j.per_learner = {1, 1024, gpus};
  return j;
}

// `job` holds learners on `nodes` with `gpus`, counted on the snapshot's nodes.
void Hold(ClusterSnapshot& s, JobRequest& job, std::vector<std::string> nodes, Gpus gpus) {
  job.allocation = std::move(nodes);
  job.allocation_gpus = std::move(gpus);
  for (size_t i = 0; i < job.allocation.size(); ++i) {
    for (Node& n : s.nodes) {
      if (n.name != job.allocation[i]) continue;
      n.allocated += job.per_learner;
      n.gpus_held.insert(n.gpus_held.end(), job.allocation_gpus[i].begin(),
                         job.allocation_gpus[i].end());
    }
  }
}

TEST(AssignGpusTest, TwoJobsOfOneGpuOnANodeOfTwoGetDifferentDevices) {
  ClusterSnapshot s;
  s.nodes = {GpuNode("n1", 2)};
  s.jobs = {Job("a", 1, 1), Job("b", 1, 1)};
  Decisions d;
  d.placements = {{"a", {"n1"}, "", {}}, {"b", {"n1"}, "", {}}};
  ASSERT_TRUE(AssignGpus(s, &d).ok());
  EXPECT_EQ(d.placements[0].learner_gpus, (Gpus{{0}}));
  EXPECT_EQ(d.placements[1].learner_gpus, (Gpus{{1}}));
  EXPECT_TRUE(CheckGpus(s, d).ok());
}

TEST(AssignGpusTest, HeldDevicesAreSkippedAndALearnerGetsAllItsDevicesOnItsNode) {
  ClusterSnapshot s;
  s.nodes = {GpuNode("n1", 8), GpuNode("n2", 8)};
  JobRequest running = Job("running", 1, 2);
  Hold(s, running, {"n1"}, {{1, 4}});
  s.jobs = {running, Job("four", 1, 4), Job("gang", 2, 3)};
  Decisions d;
  d.placements = {{"four", {"n1"}, "", {}}, {"gang", {"n2", "n2"}, "", {}}};
  ASSERT_TRUE(AssignGpus(s, &d).ok());
  EXPECT_EQ(d.placements[0].learner_gpus, (Gpus{{0, 2, 3, 5}}));
  EXPECT_EQ(d.placements[1].learner_gpus, (Gpus{{0, 1, 2}, {3, 4, 5}}));
  EXPECT_TRUE(CheckGpus(s, d).ok());
}

TEST(AssignGpusTest, AGrowKeepsTheLearnersDevicesAndAShrinkKeepsTheStayersButFreesNothingInWeftd) {
  ClusterSnapshot s;
  s.preemption_frees_at_once = false;  // weftd
  s.nodes = {GpuNode("n1", 4)};
  JobRequest grows = Job("grows", 1, 1), shrinks = Job("shrinks", 2, 1);
  grows.max_learners = 3;
  shrinks.min_learners = 1;
  Hold(s, grows, {"n1"}, {{2}});
  Hold(s, shrinks, {"n1", "n1"}, {{0}, {3}});
  s.jobs = {shrinks, grows};
  Decisions d;
  d.placements = {{"shrinks", {"n1"}, "shrink", {}}, {"grows", {"n1", "n1"}, "grow", {}}};
  ASSERT_TRUE(AssignGpus(s, &d).ok());
  EXPECT_EQ(d.placements[0].learner_gpus, (Gpus{{0}}));
  EXPECT_EQ(d.placements[1].learner_gpus, (Gpus{{2}, {1}}));  // 3 still held by the leaver
  EXPECT_TRUE(CheckGpus(s, d).ok());
  // A second newcomer finds none free: the leaver's device is not reused in the same round.
  d.placements[1].learner_nodes.push_back("n1");
  absl::Status status = AssignGpus(s, &d);
  EXPECT_TRUE(absl::IsFailedPrecondition(status));
  EXPECT_THAT(std::string(status.message()), HasSubstr("node n1 has 0 free GPUs"));
}

TEST(AssignGpusTest, WherePreemptionFreesAtOnceAPreemptedJobsDevicesAreReused) {
  ClusterSnapshot s;  // weft-sim
  s.nodes = {GpuNode("n1", 2)};
  JobRequest old = Job("old", 1, 2);
  Hold(s, old, {"n1"}, {{0, 1}});
  s.jobs = {old, Job("new", 1, 2)};
  Decisions d;
  d.preempted = {"old"};
  d.placements = {{"new", {"n1"}, "", {}}};
  ASSERT_TRUE(AssignGpus(s, &d).ok());
  EXPECT_EQ(d.placements[0].learner_gpus, (Gpus{{0, 1}}));
  EXPECT_TRUE(CheckGpus(s, d).ok());
  s.preemption_frees_at_once = false;
  EXPECT_FALSE(AssignGpus(s, &d).ok());
}

TEST(AssignGpusTest, ADeviceGivenTwiceOrOfAnotherNodeIsRefused) {
  ClusterSnapshot s;
  s.nodes = {GpuNode("n1", 2)};
  JobRequest held = Job("held", 1, 1);
  Hold(s, held, {"n1"}, {{1}});
  s.jobs = {held, Job("a", 1, 1)};
  Decisions d;
  d.placements = {{"a", {"n1"}, "", {{1}}}};
  absl::Status twice = CheckGpus(s, d);
  EXPECT_THAT(std::string(twice.message()), HasSubstr("GPU 1 of node n1"));
  d.placements[0].learner_gpus = {{7}};
  EXPECT_THAT(std::string(CheckGpus(s, d).message()), HasSubstr("node n1 has no GPU 7"));
  d.placements[0].learner_gpus = {{0, 1}};
  EXPECT_THAT(std::string(CheckGpus(s, d).message()), HasSubstr("has 2 GPUs, not 1"));
}

// The policy decides counts as before; the devices follow. A third one-GPU job on a node of two
// waits, and the reason names the GPUs.
TEST(AssignGpusTest, AfterTheFairSharePolicyAThirdJobWaitsNamingGpus) {
  ClusterSnapshot s;
  s.preemption_frees_at_once = false;
  s.nodes = {GpuNode("n1", 2)};
  JobRequest a = Job("a", 1, 1), b = Job("b", 1, 1), c = Job("c", 1, 1);
  c.tenant = b.tenant = a.tenant;
  s.jobs = {a, b, c};
  FairSharePolicy policy;
  Decisions d = policy.Schedule(s);
  ASSERT_TRUE(CheckDecisions(s, d, {false, true}).ok());
  ASSERT_TRUE(AssignGpus(s, &d).ok());
  ASSERT_EQ(d.placements.size(), 2u);
  EXPECT_THAT(d.placements[0].learner_gpus, ElementsAre(ElementsAre(0)));
  EXPECT_THAT(d.placements[1].learner_gpus, ElementsAre(ElementsAre(1)));
  ASSERT_EQ(d.waiting.size(), 1u);
  EXPECT_EQ(d.waiting[0].job_id, "c");
  EXPECT_THAT(d.waiting[0].reason, HasSubstr("gpus"));
}

}  // namespace
}  // namespace weft::scheduler
