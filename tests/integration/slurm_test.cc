// weftd on a Slurm cluster (weftd --executor slurm), through the real binaries and a throwaway
// Slurm cluster of two logical nodes (executor/slurm_cluster.h): a 2-learner gang spread over
// both nodes trains to completion, each learner a Slurm job; weftd killed mid-training adopts the
// learners by their Slurm job ids; a learner cancelled from outside (scancel) restarts the job with
// a readable reason; the 2-learner CNN example survives a learner killed -9 and reaches its
// deliver target; a parameter-server job sharded over 2 weft-ps servers runs them as Slurm jobs
// beside its learners and completes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "executor/slurm_cluster.h"
#include "integration/weftd_test.h"
#include "nlohmann/json.hpp"

namespace weft {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using testing::SlurmCluster;

class SlurmTest : public testing::WeftdTest {
 protected:
  // Two Slurm nodes of CpusPerNode() cpus; weftd runs learners through them.
  testing::WeftdTestOptions Options() const override {
    testing::WeftdTestOptions o("slurm");
    o.fashion_mnist = true;
    o.slurm_nodes = 2;
    o.slurm_cpus_per_node = CpusPerNode();
    return o;
  }
  void SetUp() override {
    WeftdTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    manifest_ = Write("gang.yaml",
                      "name: gang\nmodel: {architecture: mlp, hidden_units: [128]}\n"
                      "data: {train_samples: 12000, test_samples: 2000}\n"
                      "training: {epochs: 6, threads: 1}\n"
                      "resources: {cpus: 1, memory_mb: 1024, learners: 2, placement: spread}\n");
  }
  void TearDown() override {
    weftd_.reset();
    if (slurm_ != nullptr) {
      // Cancelling every Slurm job ends every learner's container too: none is left behind
      // running (a container's engine process leaves the Slurm job's; the launch script stays
      // to stop it). The containers mount weftd's data directory.
      slurm_.reset();
      std::string left;
      for (int i = 0; i < 30; ++i) {
        left = Containers(dir_);
        if (left.empty()) break;
        std::this_thread::sleep_for(std::chrono::seconds(1));
      }
      EXPECT_EQ(left, "") << "containers left running after their Slurm jobs were cancelled";
    }
    WeftdTest::TearDown();
  }
  virtual int CpusPerNode() const { return 1; }

  // The names of the containers that mount something under `dir`, one per line.
  static std::string Containers(const std::string& dir) {
    FILE* p = popen("podman ps --all --format '{{.Names}} {{.Mounts}}' 2>/dev/null", "r");
    if (p == nullptr) return "";
    std::string out;
    char line[8192];
    while (fgets(line, sizeof(line), p) != nullptr) {
      if (std::string(line).find(dir) != std::string::npos) out += line;
    }
    pclose(p);
    return out;
  }

  // The Slurm job names of the learners weftd runs (squeue's %j), sorted.
  std::string SlurmJobNames() const {
    return slurm_->Command({"squeue", "-h", "-o", "%j %N", "--sort=j"}).text;
  }

  std::string manifest_;
};

TEST_F(SlurmTest, AGangOnTwoSlurmNodesCompletesAndAKilledWeftdAdoptsItByJobIds) {
  auto submit = weftd_->Cli({"submit", manifest_});
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  const std::string id = testing::SubmittedJobId(submit.output);
  json running = weftd_->WaitForJob(id, {"RUNNING"}, 90);
  ASSERT_EQ(running["state"], "RUNNING") << weftd_->log();
  // Each learner is a Slurm job named after it, on its own node.
  const std::string names = SlurmJobNames();
  EXPECT_THAT(names, HasSubstr("weft-" + id + "-a1-r0 node"));
  EXPECT_THAT(names, HasSubstr("weft-" + id + "-a1-r1 node"));
  EXPECT_THAT(names, ::testing::AllOf(HasSubstr("node1"), HasSubstr("node2")));
  weftd_->Kill();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  ASSERT_TRUE(weftd_->Start()) << weftd_->log();
  json done = weftd_->WaitForJob(id, {"COMPLETED", "FAILED"}, 300);
  ASSERT_EQ(done["state"], "COMPLETED") << done.dump(2) << weftd_->log();
  EXPECT_EQ(done["attempt"], 1) << "adopted by Slurm job id, never restarted";
  EXPECT_THAT(weftd_->log(), HasSubstr("adopted learner"));
}

TEST_F(SlurmTest, ALearnerCancelledFromOutsideRestartsTheJobWithAReadableReason) {
  auto submit = weftd_->Cli({"submit", manifest_});
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  const std::string id = testing::SubmittedJobId(submit.output);
  ASSERT_EQ(weftd_->WaitForJob(id, {"RUNNING"}, 90)["state"], "RUNNING") << weftd_->log();
  ASSERT_EQ(slurm_->Command({"scancel", "--name=weft-" + id + "-a1-r1"}).exit_code, 0);
  json done = weftd_->WaitForJob(id, {"COMPLETED", "FAILED"}, 300);
  ASSERT_EQ(done["state"], "COMPLETED") << done.dump(2) << weftd_->log();
  EXPECT_EQ(done["attempt"], 2) << done["history"].dump(2);
  bool reason_seen = false;
  for (const auto& e : done["history"]) {
    const std::string reason = e["reason"];
    reason_seen |= reason.find("learner rank 1") != std::string::npos &&
                   reason.find("cancelled in Slurm from outside weft") != std::string::npos;
  }
  EXPECT_TRUE(reason_seen) << done["history"].dump(2) << weftd_->log();
}

// The end-to-end run on Slurm: the 2-learner CNN example (placement: spread) on two
// Slurm nodes; rank 1's learner killed -9 once it trains restarts the job, which then reaches
// its deliver target and hands back the delivered model. (Then halted: its 10 epochs to the
// complete target are the benchmarks' business.)
TEST_F(SlurmTest, TheCnnExampleSurvivesAKilledLearnerAndReachesItsDeliverTarget) {
  auto submit = weftd_->Cli(
      {"submit", std::string(WEFT_SOURCE_DIR) + "/examples/fashion-mnist-cnn-2-learners.yaml"});
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  const std::string id = testing::SubmittedJobId(submit.output);
  ASSERT_EQ(weftd_->WaitForJob(id, {"RUNNING"}, 90)["state"], "RUNNING") << weftd_->log();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const std::vector<int64_t> rank1 = testing::LearnerPids(id, 1);
  ASSERT_EQ(rank1.size(), 1u);
  ASSERT_EQ(kill(static_cast<pid_t>(rank1[0]), SIGKILL), 0);
  json job;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(600);
  while (std::chrono::steady_clock::now() < deadline) {
    auto r = weftd_->Client().Get("/v1/jobs/" + id);
    if (r && r->status == 200) job = json::parse(r->body);
    if (job.is_object() && (job["models"].contains("delivered") || job["state"] == "FAILED")) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  ASSERT_TRUE(job["models"].contains("delivered")) << job.dump(2) << weftd_->log();
  EXPECT_TRUE(job["targets"]["deliver"]["met"].get<bool>());
  EXPECT_GE(job["models"]["delivered"]["test_accuracy"].get<double>(), 0.88);
  EXPECT_GE(job["attempt"].get<int>(), 2) << "the killed learner restarted the job";
  bool reason_seen = false;
  for (const auto& e : job["history"]) {
    const std::string reason = e["reason"];
    reason_seen |= reason.find("learner rank 1 killed by signal 9") != std::string::npos;
  }
  EXPECT_TRUE(reason_seen) << job["history"].dump(2);
  EXPECT_EQ(weftd_->Cli({"halt", id}).exit_code, 0);
}

// Two Slurm nodes of 2 cpus: room for a gang of 2 learners and 2 weft-ps servers.
class SlurmParameterServerTest : public SlurmTest {
 protected:
  int CpusPerNode() const override { return 2; }
};

TEST_F(SlurmParameterServerTest, AShardedJobRunsItsServersAsSlurmJobsBesideItsLearners) {
  const std::string manifest = slurm_->dir() + "/sharded.yaml";
  std::ofstream(manifest) << "name: sharded\nmodel: {architecture: mlp, hidden_units: [128]}\n"
                             "data: {train_samples: 12000, test_samples: 2000}\n"
                             "training: {epochs: 30, threads: 1, sync: ps, ps: {servers: 2}}\n"
                             "resources: {cpus: 1, memory_mb: 1024, learners: 2, "
                             "placement: spread}\n";
  auto submit = weftd_->Cli({"submit", manifest});
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  const std::string id = testing::SubmittedJobId(submit.output);
  json running = weftd_->WaitForJob(id, {"RUNNING"}, 90);
  ASSERT_EQ(running["state"], "RUNNING") << weftd_->log();
  // Learners and servers are Slurm jobs named after their ranks (servers after the learners).
  const std::string names = SlurmJobNames();
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_THAT(names, HasSubstr("weft-" + id + "-a1-r" + std::to_string(rank) + " node"));
  }
  json done = weftd_->WaitForJob(id, {"COMPLETED", "FAILED"}, 300);
  ASSERT_EQ(done["state"], "COMPLETED") << done.dump(2) << weftd_->log();
  EXPECT_EQ(done["attempt"], 1);
  EXPECT_THAT(testing::HistoryText(done),
              HasSubstr("placed 2 learners on nodes node1, node2; 2 parameter servers on nodes "
                        "node1, node2"));
  EXPECT_THAT(weftd_->Cli({"logs", id, "--server", "1"}).output, HasSubstr("shard account"));
  EXPECT_GT(done["models"]["final"].value("test_accuracy", 0.0), 0.80);
}

}  // namespace
}  // namespace weft
