// weftd's live job model: throughput per world size and across sizes it has not run at, the
// remaining work from progress, and the samples and seconds to a target from the learning curve.
#include "scheduler/live_job_model.h"

#include <cmath>

#include "gtest/gtest.h"

namespace weft::scheduler {
namespace {

TEST(LiveJobModelTest, KnowsNothingBeforeItsFirstReport) {
  LiveJobModel m(64, 0.8, 0.9);
  EXPECT_FALSE(m.HasThroughput());
  EXPECT_EQ(m.Goodput({1}), 0);
  EXPECT_EQ(m.StepSeconds({1}), 0);
  EXPECT_TRUE(std::isinf(m.ProgressToDeliver()));
  LiveJobModel::Estimate e = m.NextTarget(1);
  ASSERT_NE(e.target, nullptr);
  EXPECT_STREQ(e.target, "deliver");
  EXPECT_FALSE(e.seconds.has_value());
  EXPECT_FALSE(e.beyond_budget);
}

TEST(LiveJobModelTest, StepTimeIsMeasuredPerWorldSizeAndCarriedAcrossSizes) {
  LiveJobModel m(64, std::nullopt, std::nullopt);
  m.ObserveThroughput(1, 640);  // 0.1 s per step
  EXPECT_NEAR(m.StepSeconds({1}), 0.1, 1e-12);
  EXPECT_NEAR(m.Goodput({1}), 640, 1e-9);
  // Not measured at 2: one learner's step time plus the allreduce.
  EXPECT_NEAR(m.StepSeconds({2}), 0.1 * LiveJobModel::kDefaultSyncFactor, 1e-12);
  EXPECT_NEAR(m.Goodput({1, 1}), 2 * 640 / LiveJobModel::kDefaultSyncFactor, 1e-9);
  // Once measured at 2, that is what counts; 4 takes 2's step time.
  m.ObserveThroughput(2, 1000);  // 0.128 s per step
  EXPECT_NEAR(m.StepSeconds({2}), 0.128, 1e-12);
  EXPECT_NEAR(m.StepSeconds({2, 2}), 0.128, 1e-12);
  EXPECT_NEAR(m.Goodput({4}), 2000, 1e-9);
  // Later measurements move the mean with weight 0.3.
  m.ObserveThroughput(1, 320);
  EXPECT_NEAR(m.Goodput({1}), 0.7 * 640 + 0.3 * 320, 1e-9);
  // Nonsense is ignored.
  m.ObserveThroughput(3, -5);
  m.ObserveThroughput(0, 100);
  m.ObserveThroughput(3, NAN);
  EXPECT_NEAR(m.StepSeconds({3}), 0.128, 1e-12);  // nearest measured: 2
}

TEST(LiveJobModelTest, RemainingWorkComesFromProgress) {
  LiveJobModel m(64, 0.8, std::nullopt);
  m.ObserveProgress(6400, 100, 400);
  EXPECT_EQ(m.RemainingSteps(), 300);
  EXPECT_NEAR(*m.SamplesLeftInBudget(), 19200, 1e-9);
  // Without a curve the deliver target is at the latest the end of the budget.
  EXPECT_NEAR(m.ProgressToDeliver(), 19200, 1e-9);
  m.ObserveProgress(25600, 400, 400);
  EXPECT_EQ(m.RemainingSteps(), 1);
}

// The curve of a job that trains at 1,000 samples/s and evaluates every 1,000 samples; its
// deliver target is reached at 10,000 samples and it is at 4,000.
TEST(LiveJobModelTest, EstimatesTheSamplesAndSecondsToEachTargetFromTheFittedCurve) {
  const InversePowerLaw truth{0.9, 0.5, 0.3};
  const double deliver = truth.At(10000), complete = truth.At(20000);
  LiveJobModel m(50, deliver, complete);
  m.ObserveThroughput(1, 1000);
  for (int s = 1000; s <= 4000; s += 1000) m.ObserveMetric(s, truth.At(s));
  m.ObserveProgress(4000, 80, 600);  // a budget of 30,000 samples
  ASSERT_TRUE(m.Curve().has_value());
  EXPECT_NEAR(m.Curve()->c, 0.3, 1e-3);
  EXPECT_NEAR(*m.SamplesToReach(deliver), 6000, 20);
  EXPECT_NEAR(m.ProgressToDeliver(), 6000, 20);
  LiveJobModel::Estimate e = m.NextTarget(1);
  EXPECT_STREQ(e.target, "deliver");
  ASSERT_TRUE(e.seconds.has_value());
  EXPECT_NEAR(*e.seconds, 6.0, 0.02);
  EXPECT_FALSE(m.delivered());

  // An evaluation at the target delivers: the next target is complete.
  m.ObserveMetric(10000, deliver + 1e-9);
  m.ObserveProgress(10000, 200, 600);
  EXPECT_TRUE(m.delivered());
  // The forecast it made before, against when it happened.
  const LiveJobModel::DeliverForecast& f = m.deliver_forecast();
  ASSERT_TRUE(f.actual && f.first && f.last);
  EXPECT_EQ(*f.actual, 10000);
  EXPECT_NEAR(*f.last, 10000, 50);
  EXPECT_NEAR(*f.first, 10000, 50);  // fitted on the first 3 points of an exact curve
  EXPECT_EQ(m.ProgressToDeliver(), 0);
  e = m.NextTarget(1);
  EXPECT_STREQ(e.target, "complete");
  ASSERT_TRUE(e.seconds.has_value());
  EXPECT_NEAR(*e.seconds, 10.0, 0.05);

  // A target the curve reaches only after the budget is beyond it.
  LiveJobModel short_budget(50, deliver, truth.At(100000));
  short_budget.ObserveThroughput(1, 1000);
  for (int s = 1000; s <= 10000; s += 1000) short_budget.ObserveMetric(s, truth.At(s));
  short_budget.ObserveProgress(10000, 200, 600);
  e = short_budget.NextTarget(1);
  EXPECT_STREQ(e.target, "complete");
  EXPECT_FALSE(e.seconds.has_value());
  EXPECT_TRUE(e.beyond_budget);

  // A target above the curve's asymptote is never reached.
  LiveJobModel never(50, 0.95, std::nullopt);
  for (int s = 1000; s <= 5000; s += 1000) never.ObserveMetric(s, truth.At(s));
  EXPECT_FALSE(never.SamplesToReach(0.95).has_value());
  EXPECT_TRUE(never.NextTarget(1).beyond_budget);
}

TEST(LiveJobModelTest, ALongCurveIsThinnedAndStillFits) {
  const InversePowerLaw truth{0.9, 0.5, 0.3};
  LiveJobModel m(50, 0.85, std::nullopt);
  for (int i = 1; i <= 1000; ++i) m.ObserveMetric(100.0 * i, truth.At(100.0 * i));
  EXPECT_LE(m.curve_points(), LiveJobModel::kMaxCurvePoints);
  EXPECT_GE(m.curve_points(), LiveJobModel::kMaxCurvePoints / 2);
  ASSERT_TRUE(m.Curve().has_value());
  EXPECT_NEAR(m.Curve()->a, 0.9, 1e-3);
}

}  // namespace
}  // namespace weft::scheduler
