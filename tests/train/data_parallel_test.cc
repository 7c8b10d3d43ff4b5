#include "train/data_parallel.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <string>

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
  return (*dp)->Sum({static_cast<double>(rank + 1)})[0];
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

}  // namespace
}  // namespace weft::train
