#include "control/experiment_search.h"

#include <gtest/gtest.h>

#include <cmath>
#include <deque>
#include <map>
#include <set>

#include "nlohmann/json.hpp"

namespace weft {
namespace {

using scheduler::AshaDecision;

ExperimentSpec Spec(const std::string& searcher_lines) {
  const std::string text = R"(
kind: Experiment
name: mlp-search
job:
  model: {architecture: mlp, hidden_units: [64]}
  training: {epochs: 9, batch_size: 64}
search:
  space:
    training.learning_rate: {loguniform: [1e-4, 1e-1]}
    training.batch_size: {choice: [32, 64, 128]}
)" + searcher_lines;
  absl::StatusOr<ExperimentSpec> e = ParseExperiment(text);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? *e : ExperimentSpec{};
}

// A deterministic stand-in for training: the metric rises with the epochs, to a level set by the
// learning rate (best near 3e-3).
double Metric(const TrialPlan& plan) {
  const double lr = std::stod(plan.values[0].second);
  const double level = 0.9 - 0.05 * std::pow(std::log10(lr) + 2.5, 2);
  return level - 0.2 / static_cast<double>(plan.epochs);
}

// Runs the whole search with `slots` trials at once, results oldest first. With `through_json`
// the search is rebuilt from its stored state before every call, as weftd after a restart.
std::vector<TrialPlan> RunSearch(const ExperimentSpec& spec, int slots, bool through_json) {
  absl::StatusOr<ExperimentSearch> search = ExperimentSearch::Restore(spec, "");
  EXPECT_TRUE(search.ok());
  std::deque<TrialPlan> training;
  std::vector<TrialPlan> plans;
  for (int guard = 0; guard < 2000; ++guard) {
    if (through_json) {
      search = ExperimentSearch::Restore(spec, search->StateJson());
      EXPECT_TRUE(search.ok()) << search.status();
    }
    if (static_cast<int>(training.size()) < slots) {
      TrialPlan plan = search->Next();
      plans.push_back(plan);
      if (plan.kind == AshaDecision::kDone) break;
      if (plan.kind != AshaDecision::kWait) {
        training.push_back(plan);
        continue;
      }
    }
    if (training.empty()) break;
    const TrialPlan done = training.front();
    training.pop_front();
    EXPECT_TRUE(search->Report(done.trial, done.rung, Metric(done)).ok());
  }
  return plans;
}

TEST(ExperimentSearchTest, AfterARestartFromTheStoredStateThePlansAreExactlyTheSame) {
  const ExperimentSpec spec = Spec("  max_trials: 30\n  max_concurrent_trials: 3\n  seed: 11\n");
  const std::vector<TrialPlan> straight = RunSearch(spec, 3, false);
  const std::vector<TrialPlan> restarted = RunSearch(spec, 3, true);
  ASSERT_EQ(straight.size(), restarted.size());
  int promotions = 0;
  for (size_t i = 0; i < straight.size(); ++i) {
    EXPECT_EQ(straight[i].kind, restarted[i].kind) << i;
    EXPECT_EQ(straight[i].trial, restarted[i].trial) << i;
    EXPECT_EQ(straight[i].epochs, restarted[i].epochs) << i;
    EXPECT_EQ(straight[i].values, restarted[i].values) << i;
    promotions += straight[i].kind == AshaDecision::kPromote ? 1 : 0;
  }
  EXPECT_GT(promotions, 5);
  EXPECT_EQ(straight.back().kind, AshaDecision::kDone);
}

TEST(ExperimentSearchTest, APromotedTrialKeepsItsValuesAndTrainsToTheNextRung) {
  const ExperimentSpec spec = Spec("  max_trials: 9\n");
  const std::vector<TrialPlan> plans = RunSearch(spec, 1, false);
  std::map<int64_t, Hyperparameters> started;
  int promotions = 0;
  for (const TrialPlan& p : plans) {
    if (p.kind == AshaDecision::kStart) {
      EXPECT_EQ(p.epochs, 1);
      started[p.trial] = p.values;
    } else if (p.kind == AshaDecision::kPromote) {
      ++promotions;
      EXPECT_EQ(p.values, started[p.trial]) << "trial " << p.trial;
      EXPECT_TRUE(p.epochs == 3 || p.epochs == 9) << p.epochs;
    }
  }
  EXPECT_EQ(started.size(), 9u);
  EXPECT_GT(promotions, 0);
}

TEST(ExperimentSearchTest, RandomAndGridTrainEveryTrialToTheEnd) {
  const ExperimentSpec random = Spec("  searcher: random\n  max_trials: 4\n");
  for (const TrialPlan& p : RunSearch(random, 2, false)) {
    if (p.kind == AshaDecision::kStart) {
      EXPECT_EQ(p.epochs, 9);
    }
    EXPECT_NE(p.kind, AshaDecision::kPromote);
  }
  std::string grid_text = R"(
kind: Experiment
name: grid
job:
  model: {architecture: mlp, hidden_units: [64]}
  training: {epochs: 2}
search:
  searcher: grid
  space:
    training.batch_size: {choice: [32, 64]}
    model.hidden_units: {choice: [[16], [32], [64]]}
)";
  absl::StatusOr<ExperimentSpec> grid = ParseExperiment(grid_text);
  ASSERT_TRUE(grid.ok()) << grid.status();
  std::set<Hyperparameters> points;
  for (const TrialPlan& p : RunSearch(*grid, 2, false)) {
    if (p.kind == AshaDecision::kStart) points.insert(p.values);
  }
  EXPECT_EQ(points.size(), 6u) << "every point of the grid once";
}

TEST(ExperimentSearchTest, AStoredStateThatDoesNotFitIsDataLoss) {
  const ExperimentSpec spec = Spec("  max_trials: 5\n");
  absl::StatusOr<ExperimentSearch> search = ExperimentSearch::Restore(spec, "");
  ASSERT_TRUE(search.ok());
  search->Next();
  const std::string good = search->StateJson();
  ASSERT_TRUE(ExperimentSearch::Restore(spec, good).ok());
  nlohmann::json j = nlohmann::json::parse(good);
  j["results"].push_back(nlohmann::json::array());  // one rung too many
  EXPECT_TRUE(absl::IsDataLoss(ExperimentSearch::Restore(spec, j.dump()).status()));
  j = nlohmann::json::parse(good);
  j["promoted"][0].push_back(7);  // a trial that was never started
  EXPECT_TRUE(absl::IsDataLoss(ExperimentSearch::Restore(spec, j.dump()).status()));
  EXPECT_TRUE(absl::IsDataLoss(ExperimentSearch::Restore(spec, "{not json").status()));
  EXPECT_TRUE(absl::IsDataLoss(ExperimentSearch::Restore(spec, "[]").status()));
}

TEST(ExperimentSearchTest, AMetricThatIsNotAFiniteNumberCountsAsAFailure) {
  const ExperimentSpec spec = Spec("  max_trials: 3\n  eta: 3\n");
  absl::StatusOr<ExperimentSearch> search = ExperimentSearch::Restore(spec, "");
  ASSERT_TRUE(search.ok());
  for (int t = 0; t < 3; ++t) ASSERT_EQ(search->Next().kind, AshaDecision::kStart);
  ASSERT_TRUE(search->Report(0, 0, std::nan("")).ok());
  ASSERT_TRUE(search->Report(1, 0, 0.5).ok());
  ASSERT_TRUE(search->Report(2, 0, INFINITY).ok());
  const TrialPlan next = search->Next();
  ASSERT_EQ(next.kind, AshaDecision::kPromote);
  EXPECT_EQ(next.trial, 1) << "NaN and infinity are failures, not the best";
  absl::StatusOr<ExperimentSearch> again = ExperimentSearch::Restore(spec, search->StateJson());
  ASSERT_TRUE(again.ok()) << again.status();
}

}  // namespace
}  // namespace weft
