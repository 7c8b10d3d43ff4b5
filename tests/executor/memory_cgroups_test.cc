#include "executor/memory_cgroups.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace weft {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The control-file protocol, on an ordinary directory standing in for the kernel's cgroupfs
// (the kernel's own answers are in the last test, where the host has a memory cgroup).
class MemoryCgroupsFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/weft-cgroup-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(MemoryCgroupsFilesTest, V2DelegatesTheControllerLimitsWithoutSwapAndKillsAsAGroup) {
  auto cg = MemoryCgroups::Open(MemoryCgroups::Version::kV2, dir_ + "/weft-x");
  ASSERT_TRUE(cg.ok()) << cg.status();
  EXPECT_EQ(Slurp(dir_ + "/weft-x/cgroup.subtree_control"), "+memory");
  auto learner = (*cg)->Create("job-1.a2.r0", 64 << 20);
  ASSERT_TRUE(learner.ok()) << learner.status();
  EXPECT_EQ(*learner, dir_ + "/weft-x/job-1.a2.r0");
  EXPECT_EQ(Slurp(*learner + "/memory.max"), "67108864");
  EXPECT_EQ(Slurp(*learner + "/memory.swap.max"), "0");
  EXPECT_EQ(Slurp(*learner + "/memory.oom.group"), "1");
  ASSERT_TRUE((*cg)->Join(*learner, 4242).ok());
  EXPECT_EQ(Slurp(*learner + "/cgroup.procs"), "4242");
  EXPECT_THAT((*cg)->Processes(*learner), ::testing::ElementsAre(4242));

  EXPECT_EQ((*cg)->OomKills(*learner), 0) << "no memory.events yet";
  std::ofstream(*learner + "/memory.events") << "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\n";
  EXPECT_EQ((*cg)->OomKills(*learner), 1);
  EXPECT_EQ((*cg)->PeakBytes(*learner), -1);
  std::ofstream(*learner + "/memory.current") << "1000\n";
  EXPECT_EQ((*cg)->PeakBytes(*learner), 1000) << "kernels before 5.19 have no memory.peak";
  std::ofstream(*learner + "/memory.peak") << "67100000\n";
  EXPECT_EQ((*cg)->PeakBytes(*learner), 67100000);
}

TEST_F(MemoryCgroupsFilesTest, V1LimitsMemoryAndSwapWhereSwapIsAccounted) {
  auto cg = MemoryCgroups::Open(MemoryCgroups::Version::kV1, dir_ + "/weft-x");
  ASSERT_TRUE(cg.ok()) << cg.status();
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/weft-x/cgroup.subtree_control"));
  auto plain = (*cg)->Create("a.a1.r0", 128 << 20);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(Slurp(*plain + "/memory.limit_in_bytes"), "134217728");
  EXPECT_FALSE(std::filesystem::exists(*plain + "/memory.memsw.limit_in_bytes"))
      << "not made up where the kernel does not account swap";
  std::filesystem::create_directories(dir_ + "/weft-x/b.a1.r0");
  std::ofstream(dir_ + "/weft-x/b.a1.r0/memory.memsw.limit_in_bytes") << "9223372036854771712";
  auto swapped = (*cg)->Create("b.a1.r0", 128 << 20);
  ASSERT_TRUE(swapped.ok());
  EXPECT_EQ(Slurp(*swapped + "/memory.memsw.limit_in_bytes"), "134217728");

  std::ofstream(*plain + "/memory.oom_control") << "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n";
  EXPECT_EQ((*cg)->OomKills(*plain), 2);
  std::ofstream(*plain + "/memory.max_usage_in_bytes") << "134217728\n";
  EXPECT_EQ((*cg)->PeakBytes(*plain), 134217728);
}

TEST_F(MemoryCgroupsFilesTest, NamesThatLeaveTheParentAreRefused) {
  auto cg = MemoryCgroups::Open(MemoryCgroups::Version::kV2, dir_ + "/weft-x");
  ASSERT_TRUE(cg.ok());
  for (const char* name : {"", "..", ".hidden", "a/b", "../escape"}) {
    EXPECT_EQ((*cg)->Create(name, 1 << 20).status().code(), absl::StatusCode::kInvalidArgument)
        << name;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/escape"));
}

TEST(MemoryCgroupsTest, TheKernelKillsAProcessOverItsLimitAndCountsIt) {
  auto cg = MemoryCgroups::ForThisProcess(absl::StrCat("test-", getpid()));
  if (!cg.ok()) GTEST_SKIP() << "no memory cgroup here: " << cg.status();
  auto dir = (*cg)->Create("burst.a1.r0", 64 << 20);
  ASSERT_TRUE(dir.ok()) << dir.status();
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  if (child == 0) {
    char c;
    if (read(ready[0], &c, 1) != 1) _exit(3);
    execl("/usr/bin/python3", "python3", "-c", "x = bytearray(300 << 20)", nullptr);
    _exit(2);
  }
  ASSERT_TRUE((*cg)->Join(*dir, child).ok());
  EXPECT_EQ((*cg)->CgroupOf(child), *dir);
  ASSERT_EQ(write(ready[1], "x", 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  EXPECT_GE((*cg)->OomKills(*dir), 1);
  EXPECT_GE((*cg)->PeakBytes(*dir), int64_t{60} << 20);
  EXPECT_TRUE((*cg)->Remove(*dir).ok());
  EXPECT_FALSE(std::filesystem::exists(*dir));
  EXPECT_TRUE((*cg)->Remove(*dir).ok()) << "gone already is fine";
  std::filesystem::remove((*cg)->parent());
  close(ready[0]);
  close(ready[1]);
}

}  // namespace
}  // namespace weft
