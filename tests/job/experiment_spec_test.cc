#include "job/experiment_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace weft {
namespace {

using ::testing::HasSubstr;

constexpr char kGood[] = R"(
apiVersion: weft/v1
kind: Experiment
name: mlp-search
job:
  model: {architecture: mlp, hidden_units: [64]}
  data: {train_samples: 12000, test_samples: 2000}
  training: {epochs: 9, batch_size: 64}
search:
  space:
    training.learning_rate: {loguniform: [1e-4, 1e-1]}
    training.batch_size: {choice: [32, 64, 128]}
    model.hidden_units: {choice: [[64], [128], [256, 64]]}
  eta: 3
  max_trials: 27
  seed: 5
targets: {deliver: 0.8, complete: 0.86}
)";

TEST(ExperimentSpecTest, ReadsTheSearchWithDefaultsFromTheBaseJob) {
  absl::StatusOr<ExperimentSpec> e = ParseExperiment(kGood);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->name, "mlp-search");
  EXPECT_EQ(e->searcher, "asha");
  EXPECT_EQ(e->min_resource, 1);
  EXPECT_EQ(e->max_resource, 9) << "the base job's epochs";
  EXPECT_EQ(e->max_trials, 27);
  EXPECT_EQ(e->max_concurrent_trials, 2);
  EXPECT_EQ(e->seed, 5u);
  EXPECT_TRUE(e->maximize());
  EXPECT_DOUBLE_EQ(e->deliver, 0.8);
  EXPECT_EQ(e->space.dimensions.size(), 3u);
  EXPECT_EQ(e->base_spec.data.train_samples, 12000);
}

TEST(ExperimentSpecTest, ATrialIsTheBaseJobWithItsValuesNameAndEpochs) {
  absl::StatusOr<ExperimentSpec> e = ParseExperiment(kGood);
  ASSERT_TRUE(e.ok()) << e.status();
  const Hyperparameters values = SampleTrial(e->space, e->seed, 4);
  absl::StatusOr<std::string> m = TrialJobManifest(*e, 4, values, 3);
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<JobSpec> spec = ParseManifest(*m);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "mlp-search-t4");
  EXPECT_EQ(spec->training.epochs, 3);
  EXPECT_EQ(absl::StrCat(spec->training.batch_size), values[1].second);
  EXPECT_EQ(spec->data.train_samples, 12000) << "the rest of the base is kept";
  EXPECT_TRUE(spec->checkpoint.at_end) << "below max_resource (9): it may be promoted";
  absl::StatusOr<JobSpec> top = ParseManifest(*TrialJobManifest(*e, 4, values, 9));
  ASSERT_TRUE(top.ok()) << top.status();
  EXPECT_FALSE(top->checkpoint.at_end) << "at the top rung it completes";
}

struct BadCase {
  std::string from, to;  // kGood with `from` replaced by `to`
  std::string field, problem;
};

TEST(ExperimentSpecTest, EveryMistakeNamesItsField) {
  const std::vector<BadCase> cases = {
      {"kind: Experiment", "kind: TrainingJob", "kind", "Experiment"},
      {"name: mlp-search", "name: Mlp", "name", "lower-case"},
      {"name: mlp-search", "name: " + std::string(57, 'a'), "name", "at most 56"},
      {"batch_size: 64}", "batch_size: -1}", "job.training.batch_size", "positive"},
      {"training: {epochs: 9", "training: {epochs: 9, tagets: 1", "job.training.tagets",
       "unknown field"},
      {"  eta: 3", "  eta: 1", "search.eta", "[2, 16]"},
      {"  eta: 3", "  eta: 3\n  searcher: grid", "search.eta", "only to searcher asha"},
      {"  eta: 3", "  eta: 3\n  min_resource: 12", "search.max_resource", "below min_resource"},
      {"  max_trials: 27", "  max_trials: 5000", "search.max_trials", "[1, 1000]"},
      {"{choice: [32, 64, 128]}", "{choice: [32, 0]}", "search.space",
       "search.space.training.batch_size: the value 0"},
      {"{loguniform: [1e-4, 1e-1]}", "{loguniform: [-1, 1e-1]}",
       "search.space.training.learning_rate", "0 < low"},
      {"    model.hidden_units", "    training.epochs: {int: [1, 3]}\n    model.hidden_units",
       "search.space.training.epochs", "the searcher sets"},
      {"targets: {deliver: 0.8", "targets: {deliver: 0.9", "targets.deliver", "must not exceed"},
      {"data: {", "targets: {complete: 0.5}\n  data: {", "job.targets", "its own"},
      {"job:\n", "job: 3\nx:\n", "job", "must be a job manifest"},
  };
  for (const BadCase& c : cases) {
    std::string text = kGood;
    const size_t at = text.find(c.from);
    ASSERT_NE(at, std::string::npos) << c.from;
    text.replace(at, c.from.size(), c.to);
    std::vector<FieldError> errors;
    absl::StatusOr<ExperimentSpec> e = ParseExperiment(text, &errors);
    ASSERT_FALSE(e.ok()) << c.to;
    bool named = false;
    for (const FieldError& f : errors) {
      named = named || (f.field == c.field && f.problem.find(c.problem) != std::string::npos);
    }
    EXPECT_TRUE(named) << c.to << " gave: " << e.status();
  }
}

TEST(ExperimentSpecTest, AGridDefaultsToItsSizeAndNeedsChoices) {
  std::string text = kGood;
  text.replace(text.find("    training.learning_rate: {loguniform: [1e-4, 1e-1]}\n"),
               std::string("    training.learning_rate: {loguniform: [1e-4, 1e-1]}\n").size(), "");
  text.replace(text.find("  eta: 3\n  max_trials: 27\n"),
               std::string("  eta: 3\n  max_trials: 27\n").size(), "  searcher: grid\n");
  absl::StatusOr<ExperimentSpec> e = ParseExperiment(text);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->max_trials, 9) << "3 batch sizes × 3 widths";
  std::string ranged = kGood;
  ranged.replace(ranged.find("  eta: 3\n"), std::string("  eta: 3\n").size(), "  searcher: grid\n");
  EXPECT_THAT(std::string(ParseExperiment(ranged).status().message()),
              HasSubstr("grid needs every field to be a choice"));
}

TEST(ExperimentSpecTest, ACommandJobIsRefusedWithTheReason) {
  const char* text = R"(
kind: Experiment
name: cmd-search
job:
  command: [python3, train.py]
  code: train-code
search:
  space: {training.learning_rate: {uniform: [0.1, 0.2]}}
)";
  std::vector<FieldError> errors;
  ASSERT_FALSE(ParseExperiment(text, &errors).ok());
  bool named = false;
  for (const FieldError& f : errors) named = named || f.field == "job.command";
  EXPECT_TRUE(named) << ParseExperiment(text).status();
}

}  // namespace
}  // namespace weft
