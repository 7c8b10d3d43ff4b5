#include "executor/local_executor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"

namespace weft {
namespace {

class LocalExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/weft-exec-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A stand-in learner: a shell script with `body`.
  std::string Script(const std::string& body) {
    std::string path = dir_ + "/learner.sh";
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    chmod(path.c_str(), 0755);
    return path;
  }

  LearnerLaunch Launch(const std::string& job = "job-1") {
    LearnerLaunch l;
    l.job_id = job;
    l.attempt = 3;
    l.rank = 0;
    l.world_size = 1;
    l.node = "local";
    l.spec_path = dir_ + "/spec.json";
    l.data_dir = "/data";
    l.result_dir = dir_ + "/results";
    l.checkpoint_dir = dir_ + "/checkpoints";
    l.log_dir = dir_ + "/logs";
    l.coordinator_address = "127.0.0.1:1234";
    l.threads = 2;
    return l;
  }

  // Reaps until one exit arrives or ~10 s pass.
  std::vector<LearnerExit> WaitForExit(Executor& e) {
    for (int i = 0; i < 200; ++i) {
      auto exits = e.Reap();
      if (!exits.empty()) return exits;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return {};
  }

  static std::string Slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  std::string dir_;
};

// The memory limit is held by the kernel (a memory cgroup per learner, where the host gives this
// process one) or by the watchdog: the same promises either way.
enum class Limits { kWatchdog, kCgroup };

class MemoryLimitTest : public LocalExecutorTest, public ::testing::WithParamInterface<Limits> {
 protected:
  void TearDown() override {
    std::error_code ignored;  // empty by then (rmdir), or a test has said why not
    if (cgroups_) std::filesystem::remove(cgroups_->parent(), ignored);
    LocalExecutorTest::TearDown();
  }

  // The cgroups for this test's executor, or null under the watchdog. Skips the test where the
  // host gives this process no memory cgroup it may use.
  std::unique_ptr<MemoryCgroups> Cgroups() {
    if (GetParam() == Limits::kWatchdog) return nullptr;
    auto found = MemoryCgroups::ForThisProcess(absl::StrCat("test-", getpid()));
    if (!found.ok()) return nullptr;
    cgroups_ = MemoryCgroups::Open((*found)->version(), (*found)->parent()).value();
    return *std::move(found);
  }
  bool Skip() {
    if (GetParam() == Limits::kWatchdog) return false;
    auto found = MemoryCgroups::ForThisProcess(absl::StrCat("test-", getpid()));
    if (found.ok()) return false;
    std::cerr << "no memory cgroup here: " << found.status() << "\n";
    return true;
  }

  std::unique_ptr<MemoryCgroups> cgroups_;  // a second handle on the executor's parent
};

TEST_P(MemoryLimitTest, ALearnerOverItsMemoryIsKilledAndTheExitSaysWhy) {
  if (Skip()) GTEST_SKIP();
  // The stand-in holds ~200 MB in a shell variable, far over a 64 MiB limit.
  LocalExecutor ex(Script("x=$(head -c 200000000 /dev/zero | tr '\\0' a); sleep 30"),
                   SystemClock::Get(), Cgroups());
  LearnerLaunch l = Launch();
  l.memory_limit_mb = 64;
  ASSERT_TRUE(ex.Start(l).ok());
  auto exits = WaitForExit(ex);
  ASSERT_EQ(exits.size(), 1u) << "not killed within 10 s";
  EXPECT_EQ(exits[0].signal, 9);
  EXPECT_THAT(exits[0].Describe(),
              ::testing::MatchesRegex("out of memory: [0-9]+ MiB used, 64 MiB requested "
                                      "\\(resources.memory_mb\\)"));
  if (cgroups_) {
    // The shell's children leave the cgroup once the kernel has reaped them; a later Reap()
    // removes it.
    const std::string cgroup = cgroups_->parent() + "/job-1.a3.r0.1";  // its first learner
    for (int i = 0; i < 100 && std::filesystem::exists(cgroup); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      EXPECT_TRUE(ex.Reap().empty());
    }
    EXPECT_FALSE(std::filesystem::exists(cgroup)) << "the learner's cgroup outlived it by 5 s";
  }
}

TEST_P(MemoryLimitTest, MemoryOfTheLearnersChildrenCountsEvenInAnotherSession) {
  if (Skip()) GTEST_SKIP();
  // As a command job's program: a child in a session and process group of its own holds the
  // memory, the learner itself almost none.
  const std::string marker = dir_ + "/child-alive";
  LocalExecutor ex(Script("setsid sh -c 'x=$(head -c 200000000 /dev/zero | tr \"\\0\" a); "
                          "while true; do touch " +
                          marker + "; sleep 0.1; done' & wait"),
                   SystemClock::Get(), Cgroups());
  LearnerLaunch l = Launch();
  l.memory_limit_mb = 64;
  ASSERT_TRUE(ex.Start(l).ok());
  auto exits = WaitForExit(ex);
  ASSERT_EQ(exits.size(), 1u) << "not killed within 10 s";
  EXPECT_THAT(exits[0].Describe(), ::testing::HasSubstr("out of memory"));
  // The child went with it.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::filesystem::remove(marker);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_FALSE(std::filesystem::exists(marker)) << "the child in its own session still runs";
}

TEST_P(MemoryLimitTest, ALearnerWithinItsMemoryRunsToItsEnd) {
  if (Skip()) GTEST_SKIP();
  LocalExecutor ex(Script("x=$(head -c 20000000 /dev/zero | tr '\\0' a); sleep 0.5; exit 0"),
                   SystemClock::Get(), Cgroups());
  LearnerLaunch l = Launch();
  l.memory_limit_mb = 512;
  ASSERT_TRUE(ex.Start(l).ok());
  auto exits = WaitForExit(ex);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].exit_code, 0);
  EXPECT_EQ(exits[0].killed_for, "");
}

INSTANTIATE_TEST_SUITE_P(Limits, MemoryLimitTest,
                         ::testing::Values(Limits::kWatchdog, Limits::kCgroup),
                         [](const auto& info) {
                           return info.param == Limits::kWatchdog ? "Watchdog" : "Cgroup";
                         });

class CgroupLimitTest : public MemoryLimitTest {};

TEST_P(CgroupLimitTest, TheKernelStopsABurstBetweenTwoLooksOfTheWatchdog) {
  if (Skip()) GTEST_SKIP();
  // 300 MB touched and let go within a few tens of milliseconds, then a clean exit: a watchdog
  // polling /proc would most likely never see it. The kernel does.
  LocalExecutor ex(Script("/usr/bin/python3 -c 'x = bytearray(300 << 20)' && exit 0"),
                   SystemClock::Get(), Cgroups());
  LearnerLaunch l = Launch();
  l.memory_limit_mb = 64;
  ASSERT_TRUE(ex.Start(l).ok());
  auto exits = WaitForExit(ex);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_NE(exits[0].exit_code, 0);
  EXPECT_THAT(exits[0].Describe(),
              ::testing::MatchesRegex("out of memory: [0-9]+ MiB used, 64 MiB requested "
                                      "\\(resources.memory_mb\\)"));
}

TEST_P(CgroupLimitTest, EmptyCgroupsAnEarlierWeftdLeftGoAndOnesInUseStay) {
  if (Skip()) GTEST_SKIP();
  std::unique_ptr<MemoryCgroups> before = Cgroups();
  auto stale = before->Create("old-job.a1.r0", 64 << 20);
  ASSERT_TRUE(stale.ok()) << stale.status();
  auto busy = before->Create("running-job.a1.r0", 64 << 20);
  ASSERT_TRUE(busy.ok()) << busy.status();
  pid_t child = fork();
  if (child == 0) {
    pause();
    _exit(0);
  }
  ASSERT_TRUE(before->Join(*busy, child).ok());
  EXPECT_EQ(before->CgroupOf(child), *busy);
  EXPECT_EQ(before->CgroupOf(getpid()), "") << "a process outside weft's cgroups";

  LocalExecutor ex(Script("exit 0"), SystemClock::Get(), std::move(before));
  EXPECT_FALSE(std::filesystem::exists(*stale));
  EXPECT_TRUE(std::filesystem::exists(*busy));
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_TRUE(cgroups_->Remove(*busy).ok());
}

TEST_P(CgroupLimitTest, AStoppedExecutorLeavesNoCgroupBehind) {
  if (Skip()) GTEST_SKIP();
  {
    // The learner has children of its own, which the kernel reaps only after the learner.
    LocalExecutor ex(Script("sleep 30 & sleep 30 & wait"), SystemClock::Get(), Cgroups());
    LearnerLaunch l = Launch();
    l.memory_limit_mb = 64;
    ASSERT_TRUE(ex.Start(l).ok());
    ASSERT_TRUE(std::filesystem::exists(cgroups_->parent() + "/job-1.a3.r0.1"));
  }  // weftd stops: its learners are killed
  EXPECT_FALSE(std::filesystem::exists(cgroups_->parent()));
}

INSTANTIATE_TEST_SUITE_P(Limits, CgroupLimitTest, ::testing::Values(Limits::kCgroup),
                         [](const auto&) { return "Cgroup"; });

TEST_F(LocalExecutorTest, LearnerGetsTheEnvironmentContractAndItsLogIsKept) {
  LocalExecutor ex(
      Script("sleep 0.5; echo rank=$RANK world=$WORLD_SIZE job=$WEFT_JOB_ID attempt=$WEFT_ATTEMPT "
             "learner=$LEARNER_ID of=$NUM_LEARNERS result=$RESULT_DIR "
             "threads=$OMP_NUM_THREADS coord=$WEFT_COORDINATOR; echo oops >&2; exit 0"));
  auto pid = ex.Start(Launch());
  ASSERT_TRUE(pid.ok()) << pid.status();
  EXPECT_EQ(ex.Running("job-1"), 1);
  auto exits = WaitForExit(ex);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].exit_code, 0);
  EXPECT_EQ(exits[0].signal, 0);
  EXPECT_EQ(exits[0].attempt, 3);
  EXPECT_EQ(exits[0].pid, *pid);
  EXPECT_EQ(ex.Running("job-1"), 0);
  std::string log = Slurp(dir_ + "/logs/learner-0.log");
  EXPECT_NE(log.find("rank=0 world=1 job=job-1 attempt=3 learner=1 of=1 result=" + dir_ +
                     "/results threads=2 coord=127.0.0.1:1234"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("oops"), std::string::npos) << "stderr goes to the same log";
  EXPECT_TRUE(std::filesystem::is_directory(dir_ + "/checkpoints"));
}

TEST_F(LocalExecutorTest, LearnerGetsItsJobCredentialButNeverWeftdsToken) {
  setenv("WEFT_TOKEN", "weft_secret-of-the-admin", 1);
  LocalExecutor ex(Script("echo cred=$WEFT_JOB_CREDENTIAL token=${WEFT_TOKEN:-none}; exit 0"));
  LearnerLaunch l = Launch();
  l.credential = "job-credential-123";
  ASSERT_TRUE(ex.Start(l).ok());
  WaitForExit(ex);
  unsetenv("WEFT_TOKEN");
  std::string log = Slurp(dir_ + "/logs/learner-0.log");
  EXPECT_NE(log.find("cred=job-credential-123 token=none"), std::string::npos) << log;
}

TEST_F(LocalExecutorTest, GangRanksGetTheirRankAndTheRendezvousAddress) {
  // Alive long enough for Running() to count both.
  LocalExecutor ex(Script(
      "sleep 0.5; echo rank=$RANK world=$WORLD_SIZE master=$MASTER_ADDR:$MASTER_PORT; exit 0"));
  auto address = ex.RendezvousAddress("local");
  ASSERT_TRUE(address.ok()) << address.status();
  EXPECT_EQ(address->first, "127.0.0.1");
  EXPECT_GT(address->second, 0);
  for (int rank = 0; rank < 2; ++rank) {
    LearnerLaunch l = Launch();
    l.rank = rank;
    l.world_size = 2;
    l.rendezvous_host = address->first;
    l.rendezvous_port = address->second;
    ASSERT_TRUE(ex.Start(l).ok());
  }
  EXPECT_EQ(ex.Running("job-1"), 2);
  int exited = 0;
  for (int i = 0; i < 200 && exited < 2; ++i) {
    exited += static_cast<int>(ex.Reap().size());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(exited, 2);
  const std::string master = "master=127.0.0.1:" + std::to_string(address->second);
  EXPECT_NE(Slurp(dir_ + "/logs/learner-0.log").find("rank=0 world=2 " + master),
            std::string::npos);
  EXPECT_NE(Slurp(dir_ + "/logs/learner-1.log").find("rank=1 world=2 " + master),
            std::string::npos);
}

TEST_F(LocalExecutorTest, LearnerIsPinnedToItsNodesCpus) {
  cpu_set_t mine;
  ASSERT_EQ(sched_getaffinity(0, sizeof(mine), &mine), 0);
  if (!CPU_ISSET(0, &mine)) GTEST_SKIP() << "CPU 0 is not available to this process";
  LocalExecutor ex(Script("sleep 0.3; grep Cpus_allowed_list /proc/self/status; exit 0"));
  LearnerLaunch l = Launch();
  l.cpuset = {0};
  ASSERT_TRUE(ex.Start(l).ok());
  WaitForExit(ex);
  std::string log = Slurp(dir_ + "/logs/learner-0.log");
  EXPECT_NE(log.find("Cpus_allowed_list:\t0\n"), std::string::npos) << log;
}

TEST_F(LocalExecutorTest, ReportsExitCodes) {
  LocalExecutor ex(Script("exit 7"));
  ASSERT_TRUE(ex.Start(Launch()).ok());
  auto exits = WaitForExit(ex);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].exit_code, 7);
  EXPECT_EQ(exits[0].Describe(), "exit code 7");
}

TEST_F(LocalExecutorTest, StopTerminatesAndKillsAfterGrace) {
  // Ignores SIGTERM, so only the SIGKILL after the grace period ends it.
  LocalExecutor ex(Script("trap '' TERM; while true; do sleep 0.1; done"));
  ASSERT_TRUE(ex.Start(Launch()).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_TRUE(ex.Stop("job-1", /*grace_ms=*/300).ok());
  auto exits = WaitForExit(ex);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].signal, SIGKILL);
  EXPECT_EQ(exits[0].Describe(), "killed by signal 9 (SIGKILL)");
}

TEST_F(LocalExecutorTest, StopOnlyTouchesItsJob) {
  LocalExecutor ex(Script("sleep 30"));
  ASSERT_TRUE(ex.Start(Launch("job-1")).ok());
  ASSERT_TRUE(ex.Start(Launch("job-2")).ok());
  ASSERT_TRUE(ex.Stop("job-1", 0).ok());
  auto exits = WaitForExit(ex);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].job_id, "job-1");
  EXPECT_EQ(ex.Running("job-2"), 1);
}

TEST_F(LocalExecutorTest, ImmediateStopKillsAndRunningSeesItBeforeReap) {
  LocalExecutor ex(Script("trap '' TERM; sleep 30"));
  ASSERT_TRUE(ex.Start(Launch()).ok());
  ASSERT_TRUE(ex.Stop("job-1", /*grace_ms=*/0).ok());
  int running = 1;
  for (int i = 0; i < 100 && (running = ex.Running("job-1")) > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(running, 0);
  EXPECT_EQ(ex.Unreaped("job-1"), 1) << "its exit is not reported yet";
  auto exits = ex.Reap();
  ASSERT_EQ(exits.size(), 1u) << "the exit is still reported";
  EXPECT_EQ(exits[0].signal, SIGKILL);
  EXPECT_EQ(ex.Unreaped("job-1"), 0);
}

TEST_F(LocalExecutorTest, MissingBinaryIsAnError) {
  LocalExecutor ex(dir_ + "/does-not-exist");
  auto pid = ex.Start(Launch());
  // posix_spawn reports exec failure either at once or as exit code 127.
  if (pid.ok()) {
    auto exits = WaitForExit(ex);
    ASSERT_EQ(exits.size(), 1u);
    EXPECT_EQ(exits[0].exit_code, 127);
  } else {
    EXPECT_TRUE(absl::IsInternal(pid.status()));
  }
}

}  // namespace
}  // namespace weft
