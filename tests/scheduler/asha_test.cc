#include "scheduler/asha.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <deque>

namespace weft::scheduler {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

AshaConfig Config(int eta, int64_t r, int64_t R, int64_t trials) {
  AshaConfig c;
  c.eta = eta;
  c.min_resource = r;
  c.max_resource = R;
  c.max_trials = trials;
  return c;
}

TEST(AshaTest, RungsGrowByEtaUpToTheMaxResource) {
  EXPECT_THAT(AshaRungResources(Config(3, 1, 9, 1)), ElementsAre(1, 3, 9));
  EXPECT_THAT(AshaRungResources(Config(3, 1, 10, 1)), ElementsAre(1, 3, 9, 10));
  EXPECT_THAT(AshaRungResources(Config(2, 5, 40, 1)), ElementsAre(5, 10, 20, 40));
  EXPECT_THAT(AshaRungResources(Config(4, 7, 7, 1)), ElementsAre(7)) << "one rung: random search";
  EXPECT_THAT(AshaRungResources(Config(3, int64_t{1} << 62, INT64_MAX, 1)),
              ElementsAre(int64_t{1} << 62, INT64_MAX))
      << "no overflow near the top of int64";
}

TEST(AshaTest, ABadConfigNamesItsField) {
  EXPECT_THAT(std::string(CheckAshaConfig(Config(1, 1, 9, 4)).message()), HasSubstr("eta"));
  EXPECT_THAT(std::string(CheckAshaConfig(Config(3, 0, 9, 4)).message()),
              HasSubstr("min_resource"));
  EXPECT_THAT(std::string(CheckAshaConfig(Config(3, 5, 4, 4)).message()),
              HasSubstr("max_resource"));
  EXPECT_THAT(std::string(CheckAshaConfig(Config(3, 1, 9, 0)).message()), HasSubstr("max_trials"));
  EXPECT_TRUE(CheckAshaConfig(Config(3, 1, 9, 4)).ok());
}

// The paper's rule with one slot: a rung of n results promotes its top ⌊n/η⌋; until then new
// trials start.
TEST(AshaTest, TheTopThirdOfARungIsPromotedOnceThereAreThreeResults) {
  Asha asha(Config(3, 1, 9, 10));
  const double metrics[] = {0.5, 0.9, 0.7};
  for (int t = 0; t < 3; ++t) {
    AshaDecision d = asha.Next();
    ASSERT_EQ(d.kind, AshaDecision::kStart);
    EXPECT_EQ(d.trial, t);
    EXPECT_EQ(d.resource, 1);
    ASSERT_TRUE(asha.Report(t, 0, metrics[t]).ok());
  }
  AshaDecision d = asha.Next();
  ASSERT_EQ(d.kind, AshaDecision::kPromote);
  EXPECT_EQ(d.trial, 1) << "the best of rung 0";
  EXPECT_EQ(d.rung, 1);
  EXPECT_EQ(d.resource, 3);
  d = asha.Next();
  EXPECT_EQ(d.kind, AshaDecision::kStart) << "trial 1 is promoted already; nobody else qualifies";
  EXPECT_EQ(d.trial, 3);
  EXPECT_EQ(asha.Running(), 2);
}

TEST(AshaTest, AFailedTrialIsNeverPromotedAndMinimisingRanksLowFirst) {
  AshaConfig c = Config(2, 1, 4, 4);
  c.maximize = false;  // a loss
  Asha asha(c);
  for (int t = 0; t < 2; ++t) ASSERT_EQ(asha.Next().kind, AshaDecision::kStart);
  ASSERT_TRUE(asha.Report(0, 0, std::nullopt).ok());  // failed
  ASSERT_TRUE(asha.Report(1, 0, 0.8).ok());
  AshaDecision d = asha.Next();
  ASSERT_EQ(d.kind, AshaDecision::kPromote);
  EXPECT_EQ(d.trial, 1) << "a failure ranks below any loss";
  for (int t = 2; t < 4; ++t) ASSERT_EQ(asha.Next().kind, AshaDecision::kStart);
  ASSERT_TRUE(asha.Report(2, 0, 0.3).ok());
  ASSERT_TRUE(asha.Report(3, 0, 0.5).ok());
  d = asha.Next();
  ASSERT_EQ(d.kind, AshaDecision::kPromote);
  EXPECT_EQ(d.trial, 2) << "the lowest loss of the four; trial 1 is promoted already";
  int rung = -1;
  std::optional<AshaResult> best = asha.Best(&rung);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->trial, 2);
  EXPECT_EQ(rung, 0) << "no result in a higher rung yet";
}

TEST(AshaTest, TheBestIsTheBestLatestResultOfATrial) {
  Asha asha(Config(2, 1, 2, 3));  // rungs of 1 and 2
  for (int t = 0; t < 2; ++t) ASSERT_EQ(asha.Next().kind, AshaDecision::kStart);
  ASSERT_TRUE(asha.Report(0, 0, 0.7).ok());
  ASSERT_TRUE(asha.Report(1, 0, 0.6).ok());
  AshaDecision d = asha.Next();
  ASSERT_EQ(d.kind, AshaDecision::kPromote);
  ASSERT_EQ(d.trial, 0);
  ASSERT_TRUE(asha.Report(0, 1, 0.5).ok());  // worse after training on (overfitting)
  int rung = -1;
  std::optional<AshaResult> best = asha.Best(&rung);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->trial, 1) << "trial 0's model now scores 0.5, below trial 1's 0.6";
  EXPECT_EQ(rung, 0);
  ASSERT_EQ(asha.Next().kind, AshaDecision::kStart);
  ASSERT_TRUE(asha.Report(2, 0, std::nullopt).ok());  // a failure is never the best
  best = asha.Best(&rung);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->trial, 1);
}

TEST(AshaTest, AReportMustBeForTheRungTheTrialTrainsIn) {
  Asha asha(Config(3, 1, 9, 2));
  ASSERT_EQ(asha.Next().kind, AshaDecision::kStart);
  EXPECT_TRUE(absl::IsInvalidArgument(asha.Report(5, 0, 0.1)));
  EXPECT_TRUE(absl::IsFailedPrecondition(asha.Report(0, 1, 0.1)));
  ASSERT_TRUE(asha.Report(0, 0, 0.1).ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(asha.Report(0, 0, 0.2))) << "reported twice";
}

// A deterministic "training": trial t's metric at resource r rises with r toward a level set by
// t, so the best trials are known and the search can be checked end to end.
double Metric(int64_t trial, int64_t resource) {
  const double level = 0.5 + 0.4 * std::fmod(trial * 0.618034, 1.0);
  return level - 0.3 / static_cast<double>(resource);
}

// Runs a search with `slots` trials training at once; results come back oldest first. With
// `rebuild`, the searcher is rebuilt from its state before every call, as weftd does after a
// restart. Returns every decision in order.
std::vector<AshaDecision> RunSearch(const AshaConfig& c, int slots, bool rebuild) {
  auto asha = std::make_unique<Asha>(c);
  std::deque<AshaDecision> training;
  std::vector<AshaDecision> decisions;
  for (int guard = 0; guard < 1000; ++guard) {
    if (rebuild) asha = std::make_unique<Asha>(c, asha->state());
    if (static_cast<int>(training.size()) < slots) {
      AshaDecision d = asha->Next();
      decisions.push_back(d);
      if (d.kind == AshaDecision::kDone) break;
      if (d.kind != AshaDecision::kWait) {
        training.push_back(d);
        continue;
      }
    }
    if (training.empty()) break;
    const AshaDecision done = training.front();
    training.pop_front();
    EXPECT_TRUE(asha->Report(done.trial, done.rung, Metric(done.trial, done.resource)).ok());
  }
  return decisions;
}

TEST(AshaTest, ASearchEndsWithTheBestTrialsAtTheTopRung) {
  const AshaConfig c = Config(3, 1, 9, 27);
  std::vector<AshaDecision> decisions = RunSearch(c, 1, false);
  ASSERT_FALSE(decisions.empty());
  EXPECT_EQ(decisions.back().kind, AshaDecision::kDone);
  int starts = 0, top = 0;
  double best_level_at_top = 0;
  for (const AshaDecision& d : decisions) {
    if (d.kind == AshaDecision::kStart) ++starts;
    if (d.kind == AshaDecision::kPromote && d.resource == 9) {
      ++top;
      best_level_at_top = std::max(best_level_at_top, Metric(d.trial, 9));
    }
  }
  EXPECT_EQ(starts, 27);
  // Synchronous successive halving would take 9 to rung 1 and 3 to the top. ASHA promotes as
  // soon as a trial is in its rung's top third so far, and a rung's top changes as results come:
  // at least as many reach each rung, never all.
  EXPECT_GE(top, 3);
  EXPECT_LT(top, 9);
  double best_level = 0;
  for (int t = 0; t < 27; ++t) best_level = std::max(best_level, Metric(t, 9));
  EXPECT_DOUBLE_EQ(best_level_at_top, best_level) << "the best trial of all reached the top";
}

TEST(AshaTest, ASearcherRebuiltFromItsStateDecidesExactlyAsAnUninterruptedOne) {
  const AshaConfig c = Config(3, 1, 27, 40);
  const std::vector<AshaDecision> straight = RunSearch(c, 4, false);
  const std::vector<AshaDecision> rebuilt = RunSearch(c, 4, true);
  ASSERT_EQ(straight.size(), rebuilt.size());
  int promotions = 0;
  for (size_t i = 0; i < straight.size(); ++i) {
    EXPECT_EQ(straight[i].kind, rebuilt[i].kind) << i;
    EXPECT_EQ(straight[i].trial, rebuilt[i].trial) << i;
    EXPECT_EQ(straight[i].rung, rebuilt[i].rung) << i;
    if (straight[i].kind == AshaDecision::kPromote) ++promotions;
  }
  EXPECT_GT(promotions, 10) << "the comparison covers promotions, not only starts";
  EXPECT_EQ(straight.back().kind, AshaDecision::kDone);
}

}  // namespace
}  // namespace weft::scheduler
