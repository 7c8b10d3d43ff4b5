// The Slurm executor against a real, throwaway Slurm cluster (executor/slurm_cluster.h) and a
// stand-in learner: a shell script that prints what the contract gave it and exits as told.
#include "executor/slurm_executor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/clock.h"
#include "executor/slurm_cluster.h"
#include "job/layout.h"

namespace weft {
namespace {

using ::testing::HasSubstr;
using testing::SlurmCluster;

class SlurmExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    cluster_ = SlurmCluster::Start(2, 1, &why);
    if (cluster_ == nullptr) GTEST_SKIP() << "no Slurm cluster here: " << why;
    dir_ = cluster_->dir() + "/weft";
    std::filesystem::create_directories(dir_);
    // The stand-in learner: says who and where it is; on SIGTERM exits 7 ("trap set" once it
    // would); else sleeps $WEFT_TEST_SLEEP (from the job id) and exits with the code the job id
    // ends in.
    learner_ = dir_ + "/learner.sh";
    std::ofstream(learner_) << "#!/bin/sh\n"
                               "echo \"rank $RANK of $WORLD_SIZE job $WEFT_JOB_ID on "
                               "$SLURMD_NODENAME weftd_only=${WEFT_TEST_WEFTD_ONLY:-unset}\"\n"
                               "trap 'echo terminated; exit 7' TERM\n"
                               "echo trap set\n"
                               "case $WEFT_JOB_ID in *sleep*) sleep 120 & wait ;; esac\n"
                               "exit ${WEFT_JOB_ID##*-}\n";
    chmod(learner_.c_str(), 0755);
    executor_ =
        std::make_unique<SlurmExecutor>(Options(/*poll_interval_ms=*/100), SystemClock::Get());
  }
  // The executor's options: the stand-in learner run on the node itself (no container runtime).
  SlurmExecutor::Options Options(int64_t poll_interval_ms) const {
    SlurmExecutor::Options o;
    o.learner_binary = learner_;
    o.slurm_conf = cluster_->conf();
    o.poll_interval_ms = poll_interval_ms;
    return o;
  }
  LearnerLaunch Launch(const std::string& job, int rank, int world, const std::string& node) {
    LearnerLaunch l;
    l.job_id = job;
    l.attempt = 1;
    l.rank = rank;
    l.world_size = world;
    l.node = node;
    l.log_dir = dir_ + "/" + job + "/logs";
    l.result_dir = dir_ + "/" + job + "/results";
    l.checkpoint_dir = dir_ + "/" + job + "/checkpoints";
    l.spec_path = dir_ + "/spec.json";
    l.coordinator_address = "127.0.0.1:1";
    l.credential = "secret-it's-quoted";
    return l;
  }
  // Reaps until `n` exits arrived or 60 s passed.
  std::vector<LearnerExit> ReapAll(size_t n) {
    std::vector<LearnerExit> exits;
    for (int i = 0; i < 600 && exits.size() < n; ++i) {
      for (LearnerExit& e : executor_->Reap()) exits.push_back(e);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return exits;
  }
  static std::string Read(const std::string& path) {
    std::stringstream s;
    s << std::ifstream(path).rdbuf();
    return s.str();
  }

  std::unique_ptr<SlurmCluster> cluster_;
  std::string dir_, learner_;
  std::unique_ptr<SlurmExecutor> executor_;
};

TEST_F(SlurmExecutorTest, TheClusterIsTheNodeInventory) {
  auto nodes = executor_->Nodes();
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].name, "node1");
  EXPECT_EQ((*nodes)[1].name, "node2");
  EXPECT_EQ((*nodes)[0].cpus, 1);
  EXPECT_EQ((*nodes)[0].memory_mb, 4000);
  auto addr = executor_->RendezvousAddress("node2");
  ASSERT_TRUE(addr.ok()) << addr.status();
  EXPECT_EQ(addr->first, "127.0.0.1");
  EXPECT_GT(addr->second, 0);
  EXPECT_FALSE(executor_->RendezvousAddress("node9").ok());
}

// A gang of two on two Slurm nodes: each learner runs on its node with the contract's
// environment (nothing else of weftd's), its output in its log, and its exit
// code comes back through Reap with its handle.
TEST_F(SlurmExecutorTest, EachLearnerRunsOnItsNodeAndItsExitCodeComesBack) {
  const std::string job = "job-gang-3";
  setenv("WEFT_TEST_WEFTD_ONLY", "leaked", 1);  // in weftd's environment, not the learner's
  auto h0 = executor_->Start(Launch(job, 0, 2, "node1"));
  auto h1 = executor_->Start(Launch(job, 1, 2, "node2"));
  ASSERT_TRUE(h0.ok()) << h0.status();
  ASSERT_TRUE(h1.ok()) << h1.status();
  EXPECT_NE(*h0, *h1);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/" + job + "/logs/slurm-launch-0.sh"))
      << "the launch script (it holds the credential) is gone once submitted";
  std::vector<LearnerExit> exits = ReapAll(2);
  ASSERT_EQ(exits.size(), 2u);
  for (const LearnerExit& e : exits) {
    EXPECT_EQ(e.job_id, job);
    EXPECT_EQ(e.exit_code, 3) << e.Describe();
    EXPECT_EQ(e.signal, 0);
    EXPECT_FALSE(e.status_unknown);
    EXPECT_EQ(e.pid, e.rank == 0 ? *h0 : *h1);
  }
  EXPECT_EQ(executor_->Running(job), 0);
  EXPECT_THAT(Read(LearnerLogPath(dir_ + "/" + job + "/logs", 0)),
              HasSubstr("rank 0 of 2 job job-gang-3 on node1 weftd_only=unset"));
  EXPECT_THAT(Read(LearnerLogPath(dir_ + "/" + job + "/logs", 1)),
              HasSubstr("rank 1 of 2 job job-gang-3 on node2"));
}

// Stop: SIGTERM first (the learner checkpoints and exits 7), and a learner Slurm cannot place
// (a node it does not have) is refused with sbatch's reason.
TEST_F(SlurmExecutorTest, StopSendsSigtermAndAnUnknownNodeIsRefused) {
  const std::string job = "job-sleep-0";
  auto h = executor_->Start(Launch(job, 0, 1, "node1"));
  ASSERT_TRUE(h.ok()) << h.status();
  for (int i = 0; i < 100 && cluster_->JobState(std::to_string(*h)) != "RUNNING"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (int i = 0; i < 100 && Read(LearnerLogPath(dir_ + "/" + job + "/logs", 0)).find("trap set") ==
                                 std::string::npos;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(executor_->Running(job), 1);
  ASSERT_TRUE(executor_->Stop(job, 10000).ok());
  std::vector<LearnerExit> exits = ReapAll(1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_TRUE(exits[0].exit_code == 7 || exits[0].signal == SIGTERM) << exits[0].Describe();
  EXPECT_THAT(Read(LearnerLogPath(dir_ + "/" + job + "/logs", 0)), HasSubstr("terminated"));
  auto refused = executor_->Start(Launch("job-x-0", 0, 1, "node9"));
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("sbatch refused"));
}

// An scancel of one learner from outside weft ends that learner only, and its exit names it.
TEST_F(SlurmExecutorTest, AnOutsideCancelEndsOneLearnerAndIsItsExitsCause) {
  const std::string job = "job-sleep-2";
  auto h0 = executor_->Start(Launch(job, 0, 2, "node1"));
  auto h1 = executor_->Start(Launch(job, 1, 2, "node2"));
  ASSERT_TRUE(h0.ok() && h1.ok());
  for (int i = 0; i < 100 && (cluster_->JobState(std::to_string(*h0)) != "RUNNING" ||
                              cluster_->JobState(std::to_string(*h1)) != "RUNNING");
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ASSERT_EQ(cluster_->Command({"scancel", std::to_string(*h1)}).exit_code, 0);
  std::vector<LearnerExit> exits = ReapAll(1);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  for (LearnerExit& e : executor_->Reap()) exits.push_back(e);
  ASSERT_EQ(exits.size(), 1u) << exits[1].Describe();
  EXPECT_EQ(exits[0].rank, 1);
  EXPECT_THAT(exits[0].Describe(), HasSubstr("cancelled in Slurm from outside weft"));
  EXPECT_EQ(executor_->Running(job), 1) << "rank 0 runs on";
  EXPECT_EQ(cluster_->JobState(std::to_string(*h0)), "RUNNING");
}

// The race CI caught: a gang's rank 1 is cancelled from outside, rank 0 stops with it and is
// reaped first, and weftd's Stop of the gang reaches rank 1 while Slurm still completes its
// cancel. Rank 1's exit keeps the outside cause; rank 0's, cancelled by weft, has none.
TEST_F(SlurmExecutorTest, AnOutsideCancelKeepsItsCauseWhenWeftStopsTheGangRightAfter) {
  const std::string job = "job-sleep-3";
  auto h0 = executor_->Start(Launch(job, 0, 2, "node1"));
  auto h1 = executor_->Start(Launch(job, 1, 2, "node2"));
  ASSERT_TRUE(h0.ok() && h1.ok());
  const std::string id0 = std::to_string(*h0), id1 = std::to_string(*h1);
  for (int i = 0;
       i < 100 && (cluster_->JobState(id0) != "RUNNING" || cluster_->JobState(id1) != "RUNNING");
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ASSERT_EQ(cluster_->Command({"scancel", id1}).exit_code, 0);
  for (int i = 0; i < 100 && cluster_->JobState(id1) == "RUNNING"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(executor_->Stop(job, 10000).ok());
  std::vector<LearnerExit> exits = ReapAll(2);
  ASSERT_EQ(exits.size(), 2u);
  for (const LearnerExit& e : exits) {
    if (e.rank == 1) {
      EXPECT_THAT(e.Describe(), HasSubstr("cancelled in Slurm from outside weft"));
    } else {
      EXPECT_THAT(e.Describe(), ::testing::Not(HasSubstr("outside"))) << e.Describe();
    }
  }
}

// After a weftd restart a new executor adopts a running learner by its Slurm job id (and only
// under the learner's own name), then learns how it ends.
TEST_F(SlurmExecutorTest, ANewExecutorAdoptsARunningLearnerBySlurmJobId) {
  const std::string job = "job-sleep-1";
  auto h = executor_->Start(Launch(job, 0, 1, "node2"));
  ASSERT_TRUE(h.ok()) << h.status();
  SlurmExecutor next(Options(100), SystemClock::Get());
  LearnerLaunch other = Launch(job, 0, 1, "node2");
  other.attempt = 2;
  EXPECT_TRUE(absl::IsNotFound(next.Adopt(other, *h))) << "another attempt's name";
  EXPECT_TRUE(absl::IsNotFound(next.Adopt(Launch(job, 0, 1, "node2"), 999999)));
  ASSERT_TRUE(next.Adopt(Launch(job, 0, 1, "node2"), *h).ok());
  EXPECT_EQ(next.Running(job), 1);
  ASSERT_TRUE(next.Stop(job, 0).ok());
  std::vector<LearnerExit> exits;
  for (int i = 0; i < 600 && exits.empty(); ++i) {
    exits = next.Reap();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].pid, *h);
  EXPECT_EQ(exits[0].signal, SIGKILL) << exits[0].Describe();
  EXPECT_EQ(next.Running(job), 0);
}

}  // namespace
}  // namespace weft
