#include <gtest/gtest.h>

#include "scheduler/policy.h"

namespace weft::scheduler {
namespace {

Node MakeNode(const std::string& name, double cpus, int64_t mem, int gpus = 0) {
  return Node{name, {cpus, mem, gpus}, {}, CountedGpus(gpus), {}};
}

JobRequest Job(const std::string& id, double cpus, int64_t mem = 1024, int learners = 1,
               TimeMs t = 0) {
  JobRequest j;
  j.job_id = id;
  j.tenant = "default";
  j.submitted_ms = t;
  j.learners = learners;
  j.per_learner = {cpus, mem, 0};
  return j;
}

std::vector<std::string> Placed(const Decisions& d) {
  std::vector<std::string> ids;
  for (const auto& p : d.placements) ids.push_back(p.job_id);
  return ids;
}

TEST(FifoPolicyTest, StartsJobsInSubmissionOrderWhileTheyFit) {
  FifoPolicy fifo;
  ClusterSnapshot snap;
  snap.nodes = {MakeNode("n1", 4, 8192)};
  snap.jobs = {Job("a", 2), Job("b", 1), Job("c", 1), Job("d", 1)};
  Decisions d = fifo.Schedule(snap);
  EXPECT_EQ(Placed(d), (std::vector<std::string>{"a", "b", "c"}));
  ASSERT_EQ(d.waiting.size(), 1u);
  EXPECT_EQ(d.waiting[0].job_id, "d");
  EXPECT_NE(d.waiting[0].reason.find("waiting: no free node"), std::string::npos);
}

TEST(FifoPolicyTest, BlockedHeadBlocksEverythingBehindIt) {
  FifoPolicy fifo;
  ClusterSnapshot snap;
  snap.nodes = {MakeNode("n1", 4, 8192)};
  snap.nodes[0].allocated = {3, 1024, 0};  // one cpu free
  snap.jobs = {Job("big", 2), Job("small", 1)};
  Decisions d = fifo.Schedule(snap);
  EXPECT_TRUE(d.placements.empty());
  ASSERT_EQ(d.waiting.size(), 2u);
  EXPECT_EQ(d.waiting[1].job_id, "small");
  EXPECT_NE(d.waiting[1].reason.find("behind big"), std::string::npos);
}

TEST(FifoPolicyTest, AWaitingReasonNamesNoOtherTenantsJob) {
  FifoPolicy fifo;
  ClusterSnapshot snap;
  snap.explain = true;
  snap.nodes = {MakeNode("n1", 1, 8192)};
  snap.jobs = {Job("theirs", 2), Job("mine", 1), Job("mine-too", 1)};
  snap.jobs[0].tenant = "globex";
  Decisions d = fifo.Schedule(snap);
  ASSERT_EQ(d.waiting.size(), 3u);
  EXPECT_EQ(d.waiting[1].reason, "waiting: behind a job of another tenant (first in, first out)");
  snap.jobs[0].tenant = "default";
  d = fifo.Schedule(snap);
  EXPECT_EQ(d.waiting[1].reason, "waiting: behind theirs (first in, first out)");
}

TEST(FifoPolicyTest, NeverOvercommitsMemory) {
  FifoPolicy fifo;
  ClusterSnapshot snap;
  snap.nodes = {MakeNode("n1", 16, 4096), MakeNode("n2", 16, 2048)};
  snap.jobs = {Job("a", 1, 3000), Job("b", 1, 3000), Job("c", 1, 2000)};
  Decisions d = fifo.Schedule(snap);
  ASSERT_EQ(Placed(d), (std::vector<std::string>{"a"}));
  EXPECT_EQ(d.placements[0].learner_nodes, (std::vector<std::string>{"n1"}));
}

TEST(FifoPolicyTest, GangIsPlacedWholeOrNotAtAll) {
  FifoPolicy fifo;
  ClusterSnapshot snap;
  snap.nodes = {MakeNode("n1", 2, 8192), MakeNode("n2", 2, 8192)};
  snap.jobs = {Job("gang", 1, 1024, /*learners=*/3)};
  Decisions d = fifo.Schedule(snap);
  ASSERT_EQ(d.placements.size(), 1u);
  EXPECT_EQ(d.placements[0].learner_nodes, (std::vector<std::string>{"n1", "n1", "n2"}));
  snap.jobs = {Job("too-big", 2, 1024, /*learners=*/3)};
  d = fifo.Schedule(snap);
  EXPECT_TRUE(d.placements.empty());
}

TEST(FifoPolicyTest, EmptyQueueDecidesNothing) {
  FifoPolicy fifo;
  ClusterSnapshot snap;
  snap.nodes = {MakeNode("n1", 2, 8192)};
  Decisions d = fifo.Schedule(snap);
  EXPECT_TRUE(d.placements.empty());
  EXPECT_TRUE(d.waiting.empty());
}

TEST(CheckFeasibleTest, RejectsWhatNoNodeCanEverHold) {
  std::vector<Node> nodes = {MakeNode("n1", 2, 4096), MakeNode("n2", 4, 2048)};
  EXPECT_TRUE(CheckFeasible(Job("ok", 4, 2048), nodes).ok());
  absl::Status cpus = CheckFeasible(Job("cpus", 8), nodes);
  EXPECT_TRUE(absl::IsFailedPrecondition(cpus));
  EXPECT_NE(cpus.message().find("needs 8 cpus per learner, the largest node has 4"),
            std::string::npos)
      << cpus;
  absl::Status mem = CheckFeasible(Job("mem", 1, 100000), nodes);
  EXPECT_NE(mem.message().find("MiB memory"), std::string::npos) << mem;
  JobRequest gpu = Job("gpu", 1);
  gpu.per_learner.gpus = 1;
  EXPECT_NE(CheckFeasible(gpu, nodes).message().find("gpus"), std::string::npos);
  // Each learner fits somewhere, but not all of them at once.
  absl::Status gang = CheckFeasible(Job("gang", 2, 2048, /*learners=*/4), nodes);
  EXPECT_TRUE(absl::IsFailedPrecondition(gang));
  EXPECT_NE(gang.message().find("whole cluster"), std::string::npos) << gang;
  EXPECT_TRUE(CheckFeasible(Job("gang2", 2, 2048, /*learners=*/2), nodes).ok());
}

TEST(CheckFeasibleTest, FeasibilityIgnoresCurrentLoad) {
  std::vector<Node> nodes = {MakeNode("n1", 2, 4096)};
  nodes[0].allocated = {2, 4096, 0};
  EXPECT_TRUE(CheckFeasible(Job("later", 2, 4096), nodes).ok());
}

}  // namespace
}  // namespace weft::scheduler
