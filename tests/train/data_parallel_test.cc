#include "train/data_parallel.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <memory>
#include <string>
#include <vector>

#include "common/status_macros.h"
#include "train/trainer.h"

namespace weft::train {
namespace {

// A loopback port the kernel reports free right now.
int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// Rank `rank` of 2 joins at `port` under `prefix` and, once joined, sums rank + 1 over the group.
absl::StatusOr<double> JoinAndSum(int port, int rank, const std::string& prefix) {
  auto dp = DataParallel::Connect("127.0.0.1", port, rank, 2, /*timeout_ms=*/2000, prefix);
  if (!dp.ok()) return dp.status();
  ASSIGN_OR_RETURN(const std::vector<double> sum, (*dp)->Sum({static_cast<double>(rank + 1)}));
  return sum[0];
}

TEST(DataParallelTest, TwoRanksOfOneAttemptFormAGroup) {
  const int port = FreePort();
  auto rank1 = std::async(std::launch::async, JoinAndSum, port, 1, "job-a/attempt-1/");
  absl::StatusOr<double> sum0 = JoinAndSum(port, 0, "job-a/attempt-1/");
  absl::StatusOr<double> sum1 = rank1.get();
  ASSERT_TRUE(sum0.ok()) << sum0.status();
  ASSERT_TRUE(sum1.ok()) << sum1.status();
  EXPECT_EQ(*sum0, 3.0);
  EXPECT_EQ(*sum1, 3.0);
}

TEST(DataParallelTest, ALearnerOfAnotherAttemptAtTheSamePortDoesNotJoin) {
  // A code review's finding: the c10d store had no per-attempt prefix, so a learner of an earlier
  // attempt (or another job) that reached a reused rendezvous port could join the group.
  const int port = FreePort();
  auto stale = std::async(std::launch::async, JoinAndSum, port, 1, "job-a/attempt-1/");
  absl::StatusOr<double> current = JoinAndSum(port, 0, "job-a/attempt-2/");
  absl::StatusOr<double> straggler = stale.get();
  EXPECT_TRUE(absl::IsUnavailable(current.status())) << current.status();
  EXPECT_TRUE(absl::IsUnavailable(straggler.status())) << straggler.status();
}

TEST(DataParallelTest, OnlyTheAttemptsLearnersCanNameTheirGroupsKeys) {
  // c10d's TCPStore takes any connection: what keeps another job's learners, or anyone who
  // reaches rank 0's port, out of the group is a prefix only the attempt's credential gives.
  LearnerLaunch ours, outsider;
  ours.job_id = outsider.job_id = "job-a";
  ours.attempt = outsider.attempt = 3;
  ours.credential = std::string(64, 'a');
  outsider.credential = std::string(64, 'b');
  const std::string prefix = RendezvousPrefix(ours);
  EXPECT_EQ(prefix.rfind("job-a/attempt-3/", 0), 0u) << prefix;
  EXPECT_EQ(prefix.size(), std::string("job-a/attempt-3/").size() + 33) << prefix;
  EXPECT_EQ(prefix.find(ours.credential.substr(0, 8)), std::string::npos) << prefix;
  EXPECT_NE(RendezvousPrefix(outsider), prefix);
  EXPECT_EQ(RendezvousPrefix(ours, 4), prefix + "gen-4/");

  const int port = FreePort();
  auto intruder = std::async(std::launch::async, JoinAndSum, port, 1, RendezvousPrefix(outsider));
  absl::StatusOr<double> member = JoinAndSum(port, 0, prefix);
  EXPECT_TRUE(absl::IsUnavailable(member.status())) << member.status();
  EXPECT_TRUE(absl::IsUnavailable(intruder.get().status()));
}

// The in-place membership change an elastic job needs: 3 ranks train; rank 0 leaves (its group
// torn down mid-run, as a kill closes its connections); the survivors' next collective fails,
// they re-form as ranks 0 and 1 of 2 at a new address under a new generation's prefix, without
// a new process, and the new rank 0's state reaches the other by broadcast. Then the group grows
// back to 3 with a newcomer that gets the state the same way.
TEST(DataParallelTest, SurvivorsReformAtANewGenerationAndANewcomerGetsTheState) {
  const int port1 = FreePort();
  std::vector<std::unique_ptr<DataParallel>> dp(3);
  {
    std::vector<std::future<absl::StatusOr<std::unique_ptr<DataParallel>>>> joins;
    for (int r = 0; r < 3; ++r) {
      joins.push_back(std::async(std::launch::async, [=] {
        return DataParallel::Connect("127.0.0.1", port1, r, 3, 2000, "job-e/attempt-1/gen-1/");
      }));
    }
    for (int r = 0; r < 3; ++r) {
      auto j = joins[r].get();
      ASSERT_TRUE(j.ok()) << j.status();
      dp[r] = std::move(*j);
    }
  }
  // Rank 0 is lost: its group goes away while the others start a collective.
  auto lost = std::async(std::launch::async, [&] { dp[0].reset(); });
  auto fails = [&](int r) { return IsPeerLost(dp[r]->Sum({1.0}).status()); };
  auto rank2 = std::async(std::launch::async, fails, 2);
  EXPECT_TRUE(fails(1)) << "rank 1's collective failed";
  EXPECT_TRUE(rank2.get()) << "rank 2's collective failed";
  lost.get();
  // Generation 2: old ranks 1 and 2 become 0 and 1 at a new port.
  const int port2 = FreePort();
  auto other = std::async(std::launch::async, [&] {
    return dp[2]->Reform("127.0.0.1", port2, 1, 2, 5000, "job-e/attempt-1/gen-2/");
  });
  absl::Status reformed = dp[1]->Reform("127.0.0.1", port2, 0, 2, 5000, "job-e/attempt-1/gen-2/");
  ASSERT_TRUE(reformed.ok()) << reformed;
  ASSERT_TRUE(other.get().ok());
  EXPECT_EQ(dp[1]->rank(), 0);
  EXPECT_EQ(dp[2]->world_size(), 2);
  auto sum = std::async(std::launch::async, [&] { return dp[2]->Sum({2.0}); });
  absl::StatusOr<std::vector<double>> mine = dp[1]->Sum({1.0});
  absl::StatusOr<std::vector<double>> theirs = sum.get();
  ASSERT_TRUE(mine.ok()) << mine.status();
  ASSERT_TRUE(theirs.ok()) << theirs.status();
  EXPECT_EQ((*mine)[0], 3.0);
  EXPECT_EQ((*theirs)[0], 3.0);
  // Generation 3: a newcomer joins as rank 2 and receives rank 0's state.
  const int port3 = FreePort();
  const std::string prefix3 = "job-e/attempt-1/gen-3/";
  auto newcomer = std::async(std::launch::async, [&]() -> std::string {
    auto j = DataParallel::Connect("127.0.0.1", port3, 2, 3, 5000, prefix3);
    if (!j.ok()) return "join failed: " + std::string(j.status().message());
    return (*j)->BroadcastBytes("").value_or("broadcast failed");
  });
  auto survivor = std::async(std::launch::async, [&]() -> std::string {
    if (!dp[2]->Reform("127.0.0.1", port3, 1, 3, 5000, prefix3).ok()) return "reform failed";
    return dp[2]->BroadcastBytes("").value_or("broadcast failed");
  });
  ASSERT_TRUE(dp[1]->Reform("127.0.0.1", port3, 0, 3, 5000, prefix3).ok());
  const std::string state(std::string(100000, 'w') + "step 42");
  EXPECT_EQ(dp[1]->BroadcastBytes(state).value_or("broadcast failed"), state);
  EXPECT_EQ(newcomer.get(), state);
  EXPECT_EQ(survivor.get(), state);
}

// Rank 1 of 2 at `port`: joins, holds still until `speak` is set, then takes part in one Sum
// (of 2) unless `speak` was set to false.
absl::StatusOr<double> SilentThenSum(int port, std::shared_future<bool> speak) {
  auto dp = DataParallel::Connect("127.0.0.1", port, 1, 2, /*timeout_ms=*/600000, "job-s/",
                                  /*rendezvous_timeout_ms=*/5000);
  if (!dp.ok()) return dp.status();
  if (!speak.get()) return -1.0;
  ASSIGN_OR_RETURN(const std::vector<double> sum, (*dp)->Sum({2}));
  return sum[0];
}

TEST(DataParallelTest, ACollectiveWaitingOnASilentPeerIsGivenUpOnceTheJobMovedOn) {
  // A peer that is gone without a word on this learner's connections (seen in an elastic gang
  // test: a survivor waited out Gloo's whole timeout) is a peer that never answers: here rank 1
  // stays silent and the collective's timeout is 10 minutes.
  const int port = FreePort();
  std::promise<bool> speak;
  auto silent = std::async(std::launch::async, SilentThenSum, port, speak.get_future().share());
  auto dp = DataParallel::Connect("127.0.0.1", port, 0, 2, /*timeout_ms=*/600000, "job-s/",
                                  /*rendezvous_timeout_ms=*/5000);
  ASSERT_TRUE(dp.ok()) << dp.status();
  int asked = 0;
  (*dp)->set_give_up([&asked]() -> std::string {  // weftd moves the job on meanwhile
    return ++asked > 3 ? "weftd moved the job to a later generation" : "";
  });
  absl::StatusOr<std::vector<double>> sum = (*dp)->Sum({1});
  EXPECT_TRUE(IsPeerLost(sum.status())) << sum.status();
  EXPECT_NE(sum.status().message().find("later generation"), std::string::npos) << sum.status();
  EXPECT_GT(asked, 3) << "given up before weftd moved the job on";
  // The next generation forms at once, though the collective given up on still waits in Gloo.
  ASSERT_TRUE((*dp)->Reform("127.0.0.1", port, 0, 1, 600000, "job-s/gen-2/").ok());
  absl::StatusOr<std::vector<double>> alone = (*dp)->Sum({1});
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_EQ(*alone, std::vector<double>{1});
  dp->reset();  // does not wait for the collective given up on
  speak.set_value(false);
  EXPECT_TRUE(silent.get().ok());
}

TEST(DataParallelTest, ACollectiveWaitingOnASlowPeerIsKeptWhileTheJobHasNotMovedOn) {
  const int port = FreePort();
  std::promise<bool> speak;
  auto slow = std::async(std::launch::async, SilentThenSum, port, speak.get_future().share());
  auto dp = DataParallel::Connect("127.0.0.1", port, 0, 2, /*timeout_ms=*/600000, "job-s/",
                                  /*rendezvous_timeout_ms=*/5000);
  ASSERT_TRUE(dp.ok()) << dp.status();
  int asked = 0;
  (*dp)->set_give_up([&] {
    if (++asked == 20) speak.set_value(true);  // rank 1 speaks after about 4 s of the wait
    return std::string();
  });
  absl::StatusOr<std::vector<double>> sum = (*dp)->Sum({1});
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(*sum, std::vector<double>{3});
  EXPECT_GE(asked, 20);
  absl::StatusOr<double> theirs = slow.get();
  ASSERT_TRUE(theirs.ok()) << theirs.status();
  EXPECT_EQ(*theirs, 3);
}

TEST(DataParallelTest, ALostPeerIsToldFromOtherUnavailableErrors) {
  const absl::Status lost = PeerLost("Connection closed by peer [127.0.0.1]:4242");
  EXPECT_TRUE(absl::IsUnavailable(lost));
  EXPECT_TRUE(IsPeerLost(lost));
  EXPECT_EQ(lost.message(), "Connection closed by peer [127.0.0.1]:4242");
  EXPECT_FALSE(IsPeerLost(absl::UnavailableError("weftd is unreachable")));
  EXPECT_FALSE(IsPeerLost(absl::OkStatus()));
  auto local = DataParallel::Local();
  absl::StatusOr<std::vector<double>> sum = local->Sum({1.5, 2.0});
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(*sum, (std::vector<double>{1.5, 2.0})) << "a single learner sums over itself";
}

}  // namespace
}  // namespace weft::train
