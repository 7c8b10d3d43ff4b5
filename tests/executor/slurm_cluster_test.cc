// The throwaway Slurm cluster the Slurm executor's tests run on (executor/slurm_cluster.h):
// it comes up with every node idle, places one task per logical node, and cancels.
#include "executor/slurm_cluster.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

namespace weft::testing {
namespace {

using ::testing::HasSubstr;

class SlurmClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    cluster_ = SlurmCluster::Start(2, 1, &why);
    if (cluster_ == nullptr) GTEST_SKIP() << "no Slurm cluster here: " << why;
  }
  // Submits `args` with sbatch --parsable; the job id.
  std::string Submit(std::vector<std::string> args) {
    args.insert(args.begin(), {"sbatch", "--parsable"});
    SlurmCluster::Output out = cluster_->Command(args);
    EXPECT_EQ(out.exit_code, 0) << out.text;
    std::string id = out.text.substr(0, out.text.find_first_of(";\n"));
    return id;
  }
  // Waits until job `id`'s state is `state` ("" = gone from squeue); false after `seconds`.
  bool WaitState(const std::string& id, const std::string& state, int seconds) {
    for (int i = 0; i < seconds * 10; ++i) {
      if (cluster_->JobState(id) == state) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  std::unique_ptr<SlurmCluster> cluster_;
};

TEST_F(SlurmClusterTest, AJobOnBothNodesRunsOneTaskOnEach) {
  EXPECT_THAT(cluster_->Command({"sinfo", "-h", "-N", "-o", "%N %T"}).text,
              ::testing::AllOf(HasSubstr("node1 idle"), HasSubstr("node2 idle")));
  const std::string out = cluster_->dir() + "/both.out";
  const std::string id = Submit({"-N", "2", "--nodelist=node1,node2", "-o", out, "--wrap",
                                 "srun --ntasks=2 --ntasks-per-node=1 printenv SLURMD_NODENAME"});
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(WaitState(id, "", 60)) << "still " << cluster_->JobState(id);
  std::stringstream text;
  text << std::ifstream(out).rdbuf();
  EXPECT_THAT(text.str(), ::testing::AllOf(HasSubstr("node1"), HasSubstr("node2"))) << text.str();
}

TEST_F(SlurmClusterTest, ARunningJobIsCancelled) {
  const std::string id = Submit({"--nodelist=node2", "--wrap", "sleep 120"});
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(WaitState(id, "RUNNING", 30)) << cluster_->JobState(id);
  EXPECT_EQ(cluster_->Command({"scancel", id}).exit_code, 0);
  EXPECT_TRUE(WaitState(id, "", 30)) << "still " << cluster_->JobState(id);
}

}  // namespace
}  // namespace weft::testing
