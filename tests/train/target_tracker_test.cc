// The two-tier targets every training loop keeps (train/target_tracker.h): the delivered model is
// handed back once, at the first accuracy that meets `deliver`, the run may end at `complete`,
// and the reason it ended says which.
#include "train/target_tracker.h"

#include "gtest/gtest.h"

namespace weft::train {
namespace {

TargetSpec Targets(std::optional<double> deliver, std::optional<double> complete) {
  TargetSpec t;
  t.deliver = deliver;
  t.complete = complete;
  return t;
}

TEST(TargetTrackerTest, DeliversOnceAtTheFirstAccuracyThatMeetsTheTargetAndCompletesAtTheSecond) {
  TargetTracker t(Targets(0.8, 0.9));
  TargetTracker::Decision d = t.Observe(0.75);
  EXPECT_FALSE(d.deliver);
  EXPECT_FALSE(d.complete);
  d = t.Observe(0.82);
  EXPECT_TRUE(d.deliver);
  EXPECT_FALSE(d.complete);
  EXPECT_TRUE(t.Observe(0.81).deliver) << "not delivered until the model is written";
  t.MarkDelivered();
  EXPECT_FALSE(t.Observe(0.85).deliver);
  EXPECT_FALSE(t.WouldDeliver(0.99));
  EXPECT_FALSE(t.complete_met());
  d = t.Observe(0.91);
  EXPECT_TRUE(d.complete);
  EXPECT_TRUE(t.Observe(0.93).complete);
  EXPECT_DOUBLE_EQ(t.best(), 0.93);
  EXPECT_DOUBLE_EQ(t.last(), 0.93);
  EXPECT_EQ(t.FinishReason("unused"), "target met: test_accuracy 0.9100 >= 0.9")
      << "the first accuracy that met it";
}

TEST(TargetTrackerTest, ABudgetSpentSaysTheBestAgainstTheTargetOrTheLastWithoutOne) {
  TargetTracker with(Targets(std::nullopt, 0.95));
  with.Observe(0.88);
  with.Observe(0.86);
  EXPECT_EQ(with.BudgetReason(5), "budget exhausted, best 0.8800 (target 0.95)");
  TargetTracker without(Targets(std::nullopt, std::nullopt));
  EXPECT_FALSE(without.Observe(1.0).deliver);
  EXPECT_FALSE(without.Observe(1.0).complete);
  without.Observe(0.86);
  EXPECT_EQ(without.BudgetReason(5), "budget exhausted: 5 epochs, test_accuracy 0.8600");
  EXPECT_EQ(without.FinishReason("the command exited 0"), "the command exited 0");
}

TEST(TargetTrackerTest, ACheckpointRestoresTheBestAndWhetherItDeliveredButNotACompletion) {
  TargetTracker t(Targets(0.8, 0.9));
  t.Observe(0.95);
  t.Restore(0.84, 0.83, /*delivered=*/true);
  EXPECT_FALSE(t.complete_met()) << "a resumed run completes on its own evaluations";
  EXPECT_TRUE(t.delivered());
  EXPECT_FALSE(t.Observe(0.85).deliver);
  EXPECT_DOUBLE_EQ(t.best(), 0.85);
  t.Reset();
  EXPECT_FALSE(t.delivered());
  EXPECT_DOUBLE_EQ(t.best(), 0);
  EXPECT_TRUE(t.Observe(0.8).deliver) << "a target is met at equality";
}

}  // namespace
}  // namespace weft::train
