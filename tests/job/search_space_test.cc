#include "job/search_space.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <vector>

namespace weft {
namespace {

using ::testing::HasSubstr;

constexpr char kBase[] = R"(
name: mlp-base
model: {architecture: mlp, hidden_units: [64]}
training: {epochs: 2, batch_size: 64, learning_rate: 0.001}
)";

SearchSpace Parse(const std::string& yaml) {
  absl::StatusOr<SearchSpace> s = ParseSearchSpace(YAML::Load(yaml));
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : SearchSpace{};
}

TEST(SearchSpaceTest, ReadsEachDistributionInOrder) {
  SearchSpace s = Parse(R"(
training.learning_rate: {loguniform: [1e-4, 1e-1]}
training.batch_size: {choice: [32, 64, 128]}
training.momentum: {uniform: [0.5, 0.99]}
training.epochs: {int: [1, 4]}
)");
  ASSERT_EQ(s.dimensions.size(), 4u);
  EXPECT_EQ(s.dimensions[0].field, "training.learning_rate");
  EXPECT_EQ(s.dimensions[0].kind, SearchDimension::Kind::kLogUniform);
  EXPECT_DOUBLE_EQ(s.dimensions[0].high, 0.1);
  EXPECT_EQ(s.dimensions[1].choices, (std::vector<std::string>{"32", "64", "128"}));
  EXPECT_EQ(s.dimensions[3].kind, SearchDimension::Kind::kIntUniform);
}

struct BadSpace {
  std::string yaml;
  std::string field;    // what the error must name
  std::string problem;  // and part of its text
};

TEST(SearchSpaceTest, EveryMistakeNamesItsFieldPath) {
  const std::vector<BadSpace> cases = {
      {"[1, 2]", "search.space", "must map"},
      {"name: {choice: [a, b]}", "search.space.name", "under model. or training."},
      {"resources.cpus: {int: [1, 2]}", "search.space.resources.cpus", "under model."},
      {"training.learning_rate: {loguniform: [0, 0.1]}", "search.space.training.learning_rate",
       "0 < low"},
      {"training.learning_rate: {uniform: [0.1, 0.01]}", "search.space.training.learning_rate",
       "low < high"},
      {"training.learning_rate: {uniform: [0.1]}", "search.space.training.learning_rate",
       "two numbers"},
      {"training.epochs: {int: [1.5, 4]}", "search.space.training.epochs", "whole numbers"},
      {"training.batch_size: {choice: []}", "search.space.training.batch_size", "1 to 64"},
      {"training.batch_size: {choice: [32, 32]}", "search.space.training.batch_size", "twice"},
      {"training.batch_size: {choice: [{a: 1}]}", "search.space.training.batch_size",
       "number, text, boolean or a list"},
      {"training.batch_size: {normal: [1, 2]}", "search.space.training.batch_size.normal",
       "unknown field"},
      {"training.batch_size: {int: [1, 2], choice: [3]}", "search.space.training.batch_size",
       "one distribution"},
      {"training.optimizer: {choice: [\"a\\u0007\"]}", "search.space.training.optimizer",
       "control characters"},
  };
  for (const BadSpace& c : cases) {
    std::vector<FieldError> errors;
    absl::StatusOr<SearchSpace> s = ParseSearchSpace(YAML::Load(c.yaml), "search.space", &errors);
    ASSERT_FALSE(s.ok()) << c.yaml;
    ASSERT_FALSE(errors.empty()) << c.yaml;
    EXPECT_EQ(errors[0].field, c.field) << c.yaml;
    EXPECT_THAT(errors[0].problem, HasSubstr(c.problem)) << c.yaml;
  }
}

TEST(SearchSpaceTest, ATrialsValuesDependOnlyOnTheSeedAndItsIndexAndStayInRange) {
  SearchSpace s = Parse(R"(
training.learning_rate: {loguniform: [1e-4, 1e-1]}
training.batch_size: {choice: [32, 64, 128]}
training.epochs: {int: [1, 4]}
)");
  std::set<std::string> rates, sizes, epochs;
  for (int64_t t = 0; t < 300; ++t) {
    const Hyperparameters v = SampleTrial(s, 7, t);
    EXPECT_EQ(v, SampleTrial(s, 7, t)) << "drawing again gives the same values";
    ASSERT_EQ(v.size(), 3u);
    const double lr = std::stod(v[0].second);
    EXPECT_GE(lr, 1e-4);
    EXPECT_LE(lr, 1e-1);
    rates.insert(v[0].second);
    sizes.insert(v[1].second);
    epochs.insert(v[2].second);
  }
  EXPECT_GT(rates.size(), 250u);
  EXPECT_EQ(sizes, (std::set<std::string>{"32", "64", "128"}));
  EXPECT_EQ(epochs, (std::set<std::string>{"1", "2", "3", "4"}));
  EXPECT_NE(SampleTrial(s, 7, 0), SampleTrial(s, 8, 0)) << "another seed, another search";
  // Log-uniform: about as many draws in each decade.
  int low_decade = 0;
  for (const std::string& r : rates) low_decade += std::stod(r) < 1e-3 ? 1 : 0;
  EXPECT_GT(low_decade, 60);
  EXPECT_LT(low_decade, 140);
}

TEST(SearchSpaceTest, ASpaceOfChoicesIsDrawnWithoutReplacementUntilEveryPointWasDrawn) {
  SearchSpace s = Parse(R"(
training.learning_rate: {choice: [0.001, 0.003, 0.01, 0.03]}
training.batch_size: {choice: [32, 64, 128, 256]}
)");
  ASSERT_EQ(GridSize(s), 16);
  std::set<Hyperparameters> drawn;
  std::vector<Hyperparameters> order7, order8;
  for (int64_t t = 0; t < 16; ++t) {
    order7.push_back(SampleTrial(s, 7, t));
    order8.push_back(SampleTrial(s, 8, t));
    EXPECT_EQ(order7.back(), SampleTrial(s, 7, t)) << "drawing again gives the same values";
    drawn.insert(order7.back());
  }
  EXPECT_EQ(drawn.size(), 16u) << "16 trials of a 16-point space train every point once";
  EXPECT_EQ(std::set<Hyperparameters>(order8.begin(), order8.end()), drawn);
  EXPECT_NE(order7, order8) << "another seed, another order";
  std::vector<Hyperparameters> grid;
  for (int64_t i = 0; i < 16; ++i) grid.push_back(GridPoint(s, i));
  EXPECT_NE(order7, grid) << "shuffled, not the grid's order";
  // Past the grid's size, trials are drawn independently, still from the space.
  for (int64_t t = 16; t < 40; ++t) EXPECT_EQ(drawn.count(SampleTrial(s, 7, t)), 1u) << t;
}

TEST(SearchSpaceTest, AGridEnumeratesEveryCombinationOnce) {
  SearchSpace s = Parse(R"(
training.batch_size: {choice: [32, 64]}
model.hidden_units: {choice: [[64], [128], [256]]}
)");
  ASSERT_EQ(GridSize(s), 6);
  std::set<Hyperparameters> points;
  for (int64_t i = 0; i < 6; ++i) points.insert(GridPoint(s, i));
  EXPECT_EQ(points.size(), 6u);
  EXPECT_EQ(GridPoint(s, 1)[1].second, "[128]") << "the last dimension varies fastest";
  EXPECT_EQ(GridSize(Parse("training.momentum: {uniform: [0.1, 0.9]}")), 0)
      << "a range is not a grid";
}

TEST(SearchSpaceTest, ATrialManifestIsTheBaseWithItsValuesAndItsName) {
  absl::StatusOr<std::string> m = TrialManifest(kBase,
                                                {{"training.learning_rate", "0.0316"},
                                                 {"training.batch_size", "128"},
                                                 {"training.optimizer", "sgd"},
                                                 {"training.momentum", "0.8"},
                                                 {"model.hidden_units", "[32, 16]"}},
                                                "mlp-search-t3");
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<JobSpec> spec = ParseManifest(*m);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "mlp-search-t3");
  EXPECT_DOUBLE_EQ(spec->training.learning_rate, 0.0316);
  EXPECT_EQ(spec->training.batch_size, 128);
  EXPECT_DOUBLE_EQ(spec->training.momentum, 0.8) << "a field the base did not have is added";
  EXPECT_EQ(spec->model.hidden_units, (std::vector<int>{32, 16})) << "a list replaces a list";
  EXPECT_EQ(spec->training.epochs, 2) << "the rest of the base is kept";

  absl::StatusOr<std::string> bad = TrialManifest(kBase, {{"training.batch_size", "0"}}, "");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("training.batch_size"));
  EXPECT_FALSE(TrialManifest("- a list", {}, "").ok());
  EXPECT_FALSE(TrialManifest("name: [unclosed", {}, "").ok());
}

TEST(SearchSpaceTest, ASpaceIsCheckedAgainstTheBaseAtEveryEndOfEachRange) {
  EXPECT_TRUE(CheckSpaceAgainstBase(kBase, Parse(R"(
training.learning_rate: {loguniform: [1e-4, 1e-1]}
training.batch_size: {choice: [32, 64, 128]}
model.hidden_units: {choice: [[32], [64, 32]]}
)"))
                  .ok());
  absl::Status s = CheckSpaceAgainstBase(kBase, Parse(R"(
training.learning_rate: {loguniform: [1e-4, 1e-1]}
training.batch_size: {choice: [32, 0]}
training.optimizer: {choice: [adam, lbfgs]}
)"));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("search.space.training.batch_size: the value 0"));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("search.space.training.optimizer: the value lbfgs"));
  EXPECT_THAT(std::string(CheckSpaceAgainstBase("name: x", Parse(R"(
training.batch_size: {choice: [32]}
)"))
                              .message()),
              HasSubstr("the base job"));
}

}  // namespace
}  // namespace weft
