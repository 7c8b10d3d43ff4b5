// One shard of the scale-out parameter server, without the network: key ranges, exactly-once by
// (learner, seq), the three consistency modes, leases, discards and close.
#include "ps/shard.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "ps/ps_test_util.h"

namespace weft::ps {
namespace {

std::unique_ptr<Shard> MakeShard(const ServerConfig& config, NowMsFn now = MonotonicMs) {
  ServerState state;
  state.params.assign(static_cast<size_t>(config.num_params), 1.0f);
  auto shard = Shard::Create(config, state, std::move(now));
  EXPECT_TRUE(shard.ok()) << shard.status();
  return std::move(*shard);
}

float First(Shard& shard, int learner = 0, int64_t* applied = nullptr) {
  std::vector<float> out(static_cast<size_t>(shard.num_params()));
  int64_t a = 0;
  EXPECT_TRUE(shard.Pull(learner, out.data(), &a).ok());
  if (applied != nullptr) *applied = a;
  return out[0];
}

TEST(ShardRangeTest, RangesCoverEveryKeyOnceInOrder) {
  for (int64_t n : {1, 2, 7, 1000, 1001}) {
    for (int k = 1; k <= std::min<int64_t>(n, 5); ++k) {
      int64_t next = 0;
      for (int i = 0; i < k; ++i) {
        KeyRange r = ShardRange(n, k, i);
        EXPECT_EQ(r.begin, next) << n << " " << k << " " << i;
        EXPECT_GE(r.size(), n / k);
        EXPECT_LE(r.size(), n / k + 1);
        next = r.end;
      }
      EXPECT_EQ(next, n);
    }
  }
}

TEST(ShardTest, SizesThatDoNotMatchTheConfigAreRefused) {
  ServerConfig config = Config(2, 4, Consistency::kAsp);
  ServerState state;
  state.params.assign(3, 0.0f);
  EXPECT_EQ(Shard::Create(config, state).status().code(), absl::StatusCode::kInvalidArgument);
  state.params.assign(4, 0.0f);
  state.positions = {1};
  EXPECT_EQ(Shard::Create(config, state).status().code(), absl::StatusCode::kInvalidArgument);
  config.num_slots = 0;
  EXPECT_NE(Shard::Create(config, ServerState{}).status().message().find("num_slots"),
            std::string::npos);
}

TEST(ShardTest, AspAppliesEachSeqOnceAndAcknowledgesRepeatsAsDuplicates) {
  auto shard = MakeShard(Config(2, 3, Consistency::kAsp));
  std::vector<float> grad(3, 1.0f);
  auto r = shard->Push(0, 1, 0, grad.data(), false, 1000);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->duplicate);
  EXPECT_EQ(r->version, 1u);
  EXPECT_FLOAT_EQ(First(*shard), 0.5f);
  r = shard->Push(0, 1, 0, grad.data(), false, 1000);  // the same push again
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->duplicate);
  EXPECT_EQ(r->version, 1u);
  EXPECT_FLOAT_EQ(First(*shard), 0.5f);
  // A gap is refused; the other learner's sequence is its own.
  EXPECT_EQ(shard->Push(0, 3, 1, grad.data(), false, 1000).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(shard->Push(1, 1, 0, grad.data(), false, 1000).ok());
  int64_t applied = 0;
  EXPECT_FLOAT_EQ(First(*shard, 1, &applied), 0.0f);
  EXPECT_EQ(applied, 1);
  ApplierStats stats;
  uint64_t duplicates = 0;
  ServerState state = shard->Snapshot(&stats, &duplicates);
  EXPECT_EQ(stats.gradients_applied, 2u);
  EXPECT_EQ(stats.version, 2u);
  EXPECT_EQ(duplicates, 1u);
  EXPECT_EQ(state.positions, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(stats.staleness[0], 1u);  // learner 0's, on version 0
  EXPECT_EQ(stats.staleness[1], 1u);  // learner 1's, on version 0 with 1 applied: 1 behind
}

TEST(ShardTest, AResumedShardTakesReplaysOfAppliedSeqsAsDuplicates) {
  ServerConfig config = Config(1, 2, Consistency::kAsp);
  ServerState state;
  state.version = 7;
  state.params = {1.0f, 1.0f};
  state.positions = {5};  // seqs 1..5 were applied before the checkpoint
  auto shard = Shard::Create(config, state);
  ASSERT_TRUE(shard.ok());
  std::vector<float> grad(2, 1.0f);
  auto r = (*shard)->Push(0, 5, 7, grad.data(), false, 1000);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->duplicate);
  r = (*shard)->Push(0, 6, 7, grad.data(), false, 1000);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->duplicate);
  EXPECT_EQ(r->version, 8u);
}

TEST(ShardTest, BspAveragesOneGradientPerLearnerAndAcknowledgesWhenTheRoundIsApplied) {
  auto shard = MakeShard(Config(2, 2, Consistency::kBsp));
  std::vector<float> g0 = {1.0f, 1.0f}, g1 = {3.0f, 3.0f};
  // Learner 0 alone: its round waits for learner 1 (never heard from: counted as live).
  auto alone = shard->Push(0, 1, 0, g0.data(), false, 100);
  EXPECT_EQ(alone.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_FLOAT_EQ(First(*shard), 1.0f);
  std::thread t([&] {
    auto again = shard->Push(0, 1, 0, g0.data(), false, 5000);  // the retry waits for the round
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_TRUE(again->duplicate);
    EXPECT_EQ(again->version, 1u);
  });
  auto r = shard->Push(1, 1, 0, g1.data(), false, 5000);
  t.join();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->version, 1u);
  EXPECT_FLOAT_EQ(First(*shard), 1.0f - 0.5f * 2.0f);  // lr 0.5 × mean(1, 3)
  ApplierStats stats;
  shard->Snapshot(&stats, nullptr);
  EXPECT_EQ(stats.version, 1u);
  EXPECT_EQ(stats.gradients_applied, 2u);
}

TEST(ShardTest, BspGoesOnWithoutALearnerWhoseLeaseExpiredOrThatIsDone) {
  std::atomic<int64_t> now{0};
  ServerConfig config = Config(3, 1, Consistency::kBsp);
  config.lease_ms = 1000;
  auto shard = MakeShard(config, [&] { return now.load(); });
  std::vector<float> g = {1.0f};
  int64_t applied = 0;
  First(*shard, 1, &applied);  // learner 1 is heard from at t = 0, then silent
  ASSERT_TRUE(shard->Done(2).ok());
  EXPECT_EQ(shard->Push(0, 1, 0, g.data(), false, 0).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  now = 1001;  // learner 1's lease expires: the round is learner 0's alone
  auto r = shard->Push(0, 1, 0, g.data(), false, 1000);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->duplicate);
  EXPECT_EQ(r->version, 1u);
}

TEST(ShardTest, SspHoldsALearnerBackUntilTheSlowestIsWithinTheBound) {
  ServerConfig config = Config(2, 1, Consistency::kSsp);
  config.staleness = 1;
  auto shard = MakeShard(config);
  std::vector<float> g = {0.0f};
  ASSERT_TRUE(shard->Push(0, 1, 0, g.data(), false, 100).ok());
  ASSERT_TRUE(shard->Push(0, 2, 0, g.data(), false, 100).ok());  // learner 1 is 1 behind seq 2
  // Seq 3 would put learner 0 two ahead of learner 1: held back, nothing taken.
  EXPECT_EQ(shard->Push(0, 3, 0, g.data(), false, 100).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(shard->Push(1, 1, 0, g.data(), false, 100).ok());
  auto r = shard->Push(0, 3, 0, g.data(), false, 100);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->duplicate);
}

TEST(ShardTest, NonFiniteGradientsAreDiscardedButTheirSeqCounts) {
  auto shard = MakeShard(Config(1, 2, Consistency::kAsp));
  std::vector<float> nan = {1.0f, std::nanf("")}, ok = {1.0f, 1.0f};
  auto r = shard->Push(0, 1, 0, nan.data(), false, 100);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->discarded);
  r = shard->Push(0, 2, 0, ok.data(), true, 100);  // the learner found one in another shard's part
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->discarded);
  EXPECT_FLOAT_EQ(First(*shard), 1.0f);
  ApplierStats stats;
  ServerState state = shard->Snapshot(&stats, nullptr);
  EXPECT_EQ(stats.discarded_non_finite, 2u);
  EXPECT_EQ(stats.gradients_applied, 0u);
  EXPECT_EQ(state.positions[0], 2);
}

TEST(ShardTest, CloseEndsWaitsAndRefusesLaterCalls) {
  auto shard = MakeShard(Config(2, 1, Consistency::kBsp));
  std::vector<float> g = {1.0f};
  std::thread t([&] {
    EXPECT_EQ(shard->Push(0, 1, 0, g.data(), false, 10'000).status().code(),
              absl::StatusCode::kAborted);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  shard->Close();
  t.join();
  std::vector<float> out(1);
  int64_t applied = 0;
  EXPECT_EQ(shard->Pull(0, out.data(), &applied).status().code(), absl::StatusCode::kAborted);
}

TEST(ShardTest, ManyThreadsPushingWithRetriesApplyEachSeqOnce) {
  constexpr int kLearners = 4, kPushes = 200;
  ServerConfig config = Config(kLearners, 8, Consistency::kAsp);
  config.optimizer.learning_rate = 1.0;
  auto shard = MakeShard(config);
  std::vector<std::thread> threads;
  for (int l = 0; l < kLearners; ++l) {
    threads.emplace_back([&, l] {
      std::vector<float> g(8, 1.0f);
      for (int seq = 1; seq <= kPushes; ++seq) {
        ASSERT_TRUE(shard->Push(l, seq, 0, g.data(), false, 1000).ok());
        if (seq % 3 == 0) {
          ASSERT_TRUE(shard->Push(l, seq, 0, g.data(), false, 1000)->duplicate);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  ApplierStats stats;
  uint64_t duplicates = 0;
  shard->Snapshot(&stats, &duplicates);
  EXPECT_EQ(stats.gradients_applied, uint64_t{kLearners * kPushes});
  EXPECT_EQ(duplicates, uint64_t{kLearners * (kPushes / 3)});
  EXPECT_FLOAT_EQ(First(*shard), 1.0f - kLearners * kPushes);
}

}  // namespace
}  // namespace weft::ps
