#include "common/rate_limit.h"

#include "gtest/gtest.h"

namespace weft {
namespace {

class ManualClock : public Clock {
 public:
  TimeMs NowMs() const override { return now_; }
  void Advance(TimeMs ms) { now_ += ms; }

 private:
  TimeMs now_ = 1'000'000;
};

TEST(RateLimiterTest, ABurstPassesThenTheRateHolds) {
  ManualClock clock;
  RateLimiter limiter(RateLimit{2, 3}, clock);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(limiter.Acquire("acme"), 0) << "request " << i;
  // Empty: the next whole token comes in 1 / (2 per s) = 500 ms.
  EXPECT_EQ(limiter.Acquire("acme"), 500);
  clock.Advance(200);
  EXPECT_EQ(limiter.Acquire("acme"), 300) << "a refused request takes nothing";
  clock.Advance(300);
  EXPECT_EQ(limiter.Acquire("acme"), 0);
  EXPECT_GT(limiter.Acquire("acme"), 0);
  // A long pause refills to the burst, not beyond it.
  clock.Advance(60'000);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(limiter.Acquire("acme"), 0);
  EXPECT_GT(limiter.Acquire("acme"), 0);
}

TEST(RateLimiterTest, TenantsHaveTheirOwnBuckets) {
  ManualClock clock;
  RateLimiter limiter(RateLimit{1, 1}, clock);
  EXPECT_EQ(limiter.Acquire("acme"), 0);
  EXPECT_EQ(limiter.Acquire("acme"), 1000);
  EXPECT_EQ(limiter.Acquire("globex"), 0) << "acme's loop does not slow globex";
}

TEST(RateLimiterTest, TakeUpToGrantsWhatTheBucketHoldsAndNoMore) {
  ManualClock clock;
  RateLimiter limiter(RateLimit{10, 25}, clock);
  EXPECT_EQ(limiter.TakeUpTo("job-a", 20), 20);
  EXPECT_EQ(limiter.TakeUpTo("job-a", 20), 5) << "the rest of the burst";
  EXPECT_EQ(limiter.TakeUpTo("job-a", 20), 0);
  clock.Advance(1000);
  EXPECT_EQ(limiter.TakeUpTo("job-a", 20), 10) << "one second at 10/s";
  EXPECT_EQ(limiter.TakeUpTo("job-b", 30), 25) << "another key, its own burst";
  EXPECT_EQ(limiter.TakeUpTo("job-a", 0), 0);
}

TEST(RateLimiterTest, ZeroRateMeansNoLimit) {
  ManualClock clock;
  RateLimiter limiter(RateLimit{0, 0}, clock);
  EXPECT_FALSE(limiter.enabled());
  for (int i = 0; i < 10'000; ++i) ASSERT_EQ(limiter.Acquire("acme"), 0);
  EXPECT_EQ(limiter.TakeUpTo("job", 1'000'000), 1'000'000);
}

}  // namespace
}  // namespace weft
