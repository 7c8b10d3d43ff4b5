// The scale-up parameter server's protocol, one step at a time on one thread: segments, slot
// states, the three consistency modes, discards, take-overs and what a stuck applier leaves.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "ps/layout.h"
#include "ps/protocol.h"
#include "ps/ps_test_util.h"
#include "ps/shared_client.h"
#include "ps/shared_server.h"

namespace weft::ps {
namespace {

TEST(SegmentNameTest, OnlyJobIdsThatCannotEscapeNameASegment) {
  EXPECT_EQ(SegmentNameForJob("job-mhx3k2a9-7fq0", 2).value(), "/weft-ps-job-mhx3k2a9-7fq0-2");
  EXPECT_EQ(SegmentNameForJob("../etc", 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SegmentNameForJob("a/b", 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SegmentNameForJob("", 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SegmentNameForJob(std::string(65, 'a'), 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SegmentNameForJob("job", 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ServerConfigTest, ABadConfigNamesItsField) {
  ServerConfig config = Config(2, 10, Consistency::kAsp);
  EXPECT_TRUE(ValidateServerConfig(config).ok());
  config.num_slots = 0;
  EXPECT_NE(ValidateServerConfig(config).message().find("num_slots"), std::string::npos);
  config = Config(2, 0, Consistency::kAsp);
  EXPECT_NE(ValidateServerConfig(config).message().find("num_params"), std::string::npos);
  config = Config(2, 10, Consistency::kSsp);
  config.staleness = -1;
  EXPECT_NE(ValidateServerConfig(config).message().find("staleness"), std::string::npos);
  config = Config(2, 10, static_cast<Consistency>(7));
  EXPECT_NE(ValidateServerConfig(config).message().find("consistency"), std::string::npos);
  config = Config(2, 10, Consistency::kBsp);
  config.optimizer.learning_rate = std::nan("");
  EXPECT_NE(ValidateServerConfig(config).message().find("learning_rate"), std::string::npos);
}

TEST(SharedSegmentTest, OwnerOnlyExclusiveAndRemovedWithTheServer) {
  const std::string name = FreshSegmentName();
  std::vector<float> params(4, 1.0f);
  auto server = SharedParameterServer::Create(name, Config(1, 4, Consistency::kAsp), params.data());
  ASSERT_TRUE(server.ok()) << server.status();
  struct stat st {};
  ASSERT_EQ(stat(("/dev/shm" + name).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(SharedParameterServer::Create(name, Config(1, 4, Consistency::kAsp), params.data())
                .status()
                .code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(SharedPsClient::Attach(name, 0).ok());
  EXPECT_EQ(SharedPsClient::Attach(name, 1).status().code(), absl::StatusCode::kInvalidArgument);
  server->reset();
  EXPECT_EQ(SharedPsClient::Attach(name, 0).status().code(), absl::StatusCode::kNotFound);
}

TEST(SharedSegmentTest, ASegmentOthersCouldWriteIsRefused) {
  const std::string name = FreshSegmentName();
  int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  ASSERT_EQ(fchmod(fd, 0666), 0);
  close(fd);
  EXPECT_EQ(SharedSegment::Open(name).status().code(), absl::StatusCode::kPermissionDenied);
  fd = shm_open(name.c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(fchmod(fd, 0600), 0);
  // Owner-only and all zeros: a server still writing its header (the magic comes last); try again.
  EXPECT_EQ(SharedPsClient::Attach(name, 0).status().code(), absl::StatusCode::kUnavailable);
  // Owner-only but not a parameter server: refused by its header, not read blindly.
  ASSERT_EQ(pwrite(fd, "garbage!", 8, 0), 8);
  close(fd);
  EXPECT_EQ(SharedPsClient::Attach(name, 0).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(SharedSegment::Unlink(name).ok());
}

TEST(SharedServerTest, AspAppliesEachGradientAsAVersionOfItsOwn) {
  const std::string name = FreshSegmentName();
  std::vector<float> init = {1, 2, 3};
  auto server = SharedParameterServer::Create(name, Config(2, 3, Consistency::kAsp), init.data());
  ASSERT_TRUE(server.ok());
  auto a = SharedPsClient::Attach(name, 0).value();
  auto b = SharedPsClient::Attach(name, 1).value();
  std::vector<float> pulled(3);
  EXPECT_EQ(a->Pull(pulled.data(), 1000).value(), 0u);
  EXPECT_EQ(pulled, init);
  std::vector<float> ga = {2, 0, 0}, gb = {0, 4, 0};
  EXPECT_EQ(a->Publish(ga.data(), 0, 1000).value(), 1u);
  EXPECT_EQ(b->Publish(gb.data(), 0, 1000).value(), 1u);
  EXPECT_EQ((*server)->ApplyReady(), 2);
  EXPECT_TRUE(a->WaitApplied(1, 1000).ok());
  EXPECT_EQ(b->Pull(pulled.data(), 1000).value(), 2u);
  EXPECT_EQ(pulled, (std::vector<float>{0, 0, 3}));  // lr 0.5
  ApplierStats stats = (*server)->Stats();
  EXPECT_EQ(stats.version, 2u);
  EXPECT_EQ(stats.gradients_applied, 2u);
  EXPECT_EQ(stats.staleness[0], 1u);      // a's: computed on version 0, applied to version 0
  EXPECT_EQ(stats.staleness[1], 1u);      // b's: computed on version 0, applied to version 1
  EXPECT_EQ((*server)->ApplyReady(), 0);  // nothing is applied twice
}

TEST(SharedServerTest, BspWaitsForEveryLiveLearnerThenAppliesTheAverage) {
  const std::string name = FreshSegmentName();
  std::vector<float> init = {1, 1};
  auto server = SharedParameterServer::Create(name, Config(2, 2, Consistency::kBsp), init.data());
  ASSERT_TRUE(server.ok());
  auto a = SharedPsClient::Attach(name, 0).value();
  auto b = SharedPsClient::Attach(name, 1).value();
  std::vector<float> ga = {2, 4}, gb = {2, 0};
  ASSERT_TRUE(a->Publish(ga.data(), 0, 1000).ok());
  EXPECT_EQ((*server)->ApplyReady(), 0);  // b is live and has not published
  EXPECT_EQ(a->WaitApplied(1, 20).code(), absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(b->Publish(gb.data(), 0, 1000).ok());
  EXPECT_EQ((*server)->ApplyReady(), 2);
  std::vector<float> pulled(2);
  EXPECT_EQ(a->Pull(pulled.data(), 1000).value(), 1u);  // one version for the round
  EXPECT_EQ(pulled, (std::vector<float>{0, 0}));        // 1 - 0.5 * mean
}

TEST(SharedServerTest, BspGoesOnWithoutALearnerWhoseLeaseRanOut) {
  ManualClock clock;
  const std::string name = FreshSegmentName();
  ServerConfig config = Config(2, 1, Consistency::kBsp);
  config.lease_ms = 100;
  std::vector<float> init = {0};
  auto server = SharedParameterServer::Create(name, config, init.data(), clock.Fn()).value();
  auto a = SharedPsClient::Attach(name, 0, clock.Fn()).value();
  auto b = SharedPsClient::Attach(name, 1, clock.Fn()).value();
  std::vector<float> g = {2};
  ASSERT_TRUE(a->Publish(g.data(), 0, 1000).ok());
  EXPECT_EQ(server->ApplyReady(), 0);
  clock.now_ms += 101;  // b went silent (a lost learner)
  EXPECT_EQ(server->ApplyReady(), 1);
  EXPECT_EQ(server->Stats().version, 1u);
  // b is back (or its replacement): the next round waits for it again.
  ASSERT_TRUE(a->Publish(g.data(), 1, 1000).ok());
  std::vector<float> pulled(1);
  ASSERT_TRUE(b->Pull(pulled.data(), 1000).ok());
  EXPECT_EQ(server->ApplyReady(), 0);
  ASSERT_TRUE(b->Publish(g.data(), 1, 1000).ok());
  EXPECT_EQ(server->ApplyReady(), 2);
  EXPECT_EQ(server->Stats().version, 2u);
}

TEST(SharedServerTest, SspHoldsBackALearnerMoreThanStalenessAhead) {
  const std::string name = FreshSegmentName();
  ServerConfig config = Config(2, 1, Consistency::kSsp);
  config.staleness = 1;
  std::vector<float> init = {0}, g = {1};
  auto server = SharedParameterServer::Create(name, config, init.data()).value();
  auto fast = SharedPsClient::Attach(name, 0).value();
  auto slow = SharedPsClient::Attach(name, 1).value();
  for (uint64_t seq = 1; seq <= 2; ++seq) {  // 2 ahead of slow's 0: gradient 2 is 1 stale
    ASSERT_EQ(fast->Publish(g.data(), 0, 1000).value(), seq);
    EXPECT_EQ(server->ApplyReady(), 1);
  }
  EXPECT_EQ(fast->Publish(g.data(), 0, 30).status().code(), absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(slow->Publish(g.data(), 0, 1000).ok());
  EXPECT_EQ(fast->Publish(g.data(), 0, 1000).value(), 3u);
}

TEST(SharedServerTest, ANonFiniteGradientIsDiscardedAndItsSlotFreed) {
  const std::string name = FreshSegmentName();
  std::vector<float> init = {1, 1}, bad = {0, std::nanf("")}, inf = {INFINITY, 0}, good = {2, 2};
  auto server =
      SharedParameterServer::Create(name, Config(1, 2, Consistency::kAsp), init.data()).value();
  auto a = SharedPsClient::Attach(name, 0).value();
  ASSERT_TRUE(a->Publish(bad.data(), 0, 1000).ok());
  EXPECT_EQ(server->ApplyReady(), 1);
  ASSERT_TRUE(a->Publish(inf.data(), 0, 1000).ok());
  EXPECT_EQ(server->ApplyReady(), 1);
  ASSERT_TRUE(a->Publish(good.data(), 0, 1000).ok());
  EXPECT_EQ(server->ApplyReady(), 1);
  ApplierStats stats = server->Stats();
  EXPECT_EQ(stats.discarded_non_finite, 2u);
  EXPECT_EQ(stats.gradients_applied, 1u);
  std::vector<float> pulled(2);
  EXPECT_EQ(a->Pull(pulled.data(), 1000).value(), 1u);
  EXPECT_EQ(pulled, (std::vector<float>{0, 0}));
}

TEST(SharedServerTest, AReplacementResumesTheSequenceAndFencesOffItsPredecessor) {
  const std::string name = FreshSegmentName();
  std::vector<float> init = {0}, g = {1};
  auto server =
      SharedParameterServer::Create(name, Config(1, 1, Consistency::kAsp), init.data()).value();
  auto old_learner = SharedPsClient::Attach(name, 0).value();
  ASSERT_EQ(old_learner->Publish(g.data(), 0, 1000).value(), 1u);  // published, not applied
  auto replacement = SharedPsClient::Attach(name, 0).value();
  EXPECT_EQ(old_learner->Publish(g.data(), 0, 1000).status().code(), absl::StatusCode::kAborted);
  // The replacement's first gradient is 2, and it waits for 1 to be applied first.
  EXPECT_EQ(replacement->Publish(g.data(), 0, 20).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(server->ApplyReady(), 1);
  EXPECT_EQ(replacement->Publish(g.data(), 1, 1000).value(), 2u);
  EXPECT_EQ(server->ApplyReady(), 1);
  EXPECT_EQ(server->Stats().gradients_applied, 2u);
}

TEST(SharedServerTest, PullTimesOutWhenTheApplierDiedWritingTheParameters) {
  const std::string name = FreshSegmentName();
  std::vector<float> init = {0};
  auto server =
      SharedParameterServer::Create(name, Config(1, 1, Consistency::kAsp), init.data()).value();
  auto client = SharedPsClient::Attach(name, 0).value();
  SharedSegment raw = SharedSegment::Open(name).value();
  SegmentView view = SegmentView::Of(raw).value();
  view.header().param_seq.store(1);  // odd: an applier inside its write, forever
  std::vector<float> pulled(1);
  EXPECT_EQ(client->Pull(pulled.data(), 30).status().code(), absl::StatusCode::kDeadlineExceeded);
  view.header().param_seq.store(2);
  EXPECT_TRUE(client->Pull(pulled.data(), 30).ok());
}

TEST(SharedServerTest, ClosingTheServerReleasesAWaitingLearner) {
  const std::string name = FreshSegmentName();
  std::vector<float> init = {0}, g = {1};
  auto server =
      SharedParameterServer::Create(name, Config(1, 1, Consistency::kAsp), init.data()).value();
  auto client = SharedPsClient::Attach(name, 0).value();
  ASSERT_TRUE(client->Publish(g.data(), 0, 1000).ok());
  absl::Status waited;
  std::thread learner([&] { waited = client->WaitApplied(1, 10'000); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  server.reset();
  learner.join();
  EXPECT_EQ(waited.code(), absl::StatusCode::kUnavailable);
}

TEST(SharedServerTest, AResumedServerGoesOnFromItsStateAndASnapshotIsWhatWasApplied) {
  ServerConfig config = Config(2, 2, Consistency::kAsp);
  config.optimizer.kind = OptimizerKind::kSgd;
  config.optimizer.momentum = 0.5;
  ServerState from;
  from.version = 7;
  from.params = {1, 2};
  from.optimizer_state = {0.25f, -0.25f};
  from.positions = {10, 4};
  const std::string name = FreshSegmentName();
  ServerState wrong = from;
  wrong.positions = {1, 2, 3};
  EXPECT_EQ(SharedParameterServer::Create(name, config, wrong).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto server = SharedParameterServer::Create(name, config, from).value();
  auto a = SharedPsClient::Attach(name, 0).value();
  auto b = SharedPsClient::Attach(name, 1).value();
  EXPECT_EQ(a->start_position(), 10);  // the next batch of learner 0 is its 11th
  EXPECT_EQ(b->start_position(), 4);
  std::vector<float> pulled(2), g = {1, 1};
  EXPECT_EQ(a->Pull(pulled.data(), 1000).value(), 7u);
  EXPECT_EQ(pulled, from.params);
  std::atomic<bool> stop{false};
  std::thread applier([&] { server->Run(stop); });
  ASSERT_EQ(a->Publish(g.data(), 7, 1000).value(), 1u);
  ASSERT_TRUE(a->WaitApplied(1, 10'000).ok());
  ServerState now = server->TakeSnapshot();
  stop = true;
  applier.join();
  EXPECT_EQ(now.version, 8u);
  EXPECT_EQ(now.positions, (std::vector<int64_t>{11, 4}));
  // torch.optim.SGD: buf = 0.5 * buf + g; p -= lr * buf (lr 0.5).
  EXPECT_FLOAT_EQ(now.optimizer_state[0], 1.125f);
  EXPECT_FLOAT_EQ(now.optimizer_state[1], 0.875f);
  EXPECT_FLOAT_EQ(now.params[0], 1 - 0.5f * 1.125f);
  EXPECT_FLOAT_EQ(now.params[1], 2 - 0.5f * 0.875f);
  EXPECT_EQ(server->Positions(), now.positions);
}

TEST(SharedServerTest, ALearnerThatIsDoneNoLongerHoldsUpABspRoundThoughItStillPulls) {
  const std::string name = FreshSegmentName();
  std::vector<float> init = {0}, g = {1}, pulled(1);
  auto server =
      SharedParameterServer::Create(name, Config(2, 1, Consistency::kBsp), init.data()).value();
  auto finished = SharedPsClient::Attach(name, 0).value();
  auto other = SharedPsClient::Attach(name, 1).value();
  ASSERT_TRUE(other->Publish(g.data(), 0, 1000).ok());
  EXPECT_EQ(server->ApplyReady(), 0) << "slot 0 is live and has not published";
  finished->Done();
  ASSERT_TRUE(finished->Pull(pulled.data(), 1000).ok());  // an evaluation's pull
  EXPECT_EQ(server->ApplyReady(), 1) << "the round goes on without the learner that is done";
  EXPECT_EQ(server->Stats().version, 1u);
}

TEST(StalenessBucketTest, PowersOfTwoAfterTwo) {
  std::vector<std::pair<uint64_t, int>> cases = {{0, 0},  {1, 1},  {2, 2},   {3, 3},  {4, 3},
                                                 {5, 4},  {8, 4},  {9, 5},   {16, 5}, {17, 6},
                                                 {32, 6}, {33, 7}, {1000, 7}};
  for (auto [staleness, bucket] : cases) {
    EXPECT_EQ(StalenessBucket(staleness), bucket) << staleness;
  }
}

}  // namespace
}  // namespace weft::ps
