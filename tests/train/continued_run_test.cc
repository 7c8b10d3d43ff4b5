// A job trained on with a larger budget, as an experiment's promoted trial is: with
// checkpoint.at_end its last step is committed, and the same job with more epochs, resumed from
// that checkpoint, trains only the epochs it had not — to the very model an uninterrupted run of
// the larger budget gives. On real data with real libtorch.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "job/job_spec.h"
#include "job/layout.h"
#include "train/recording_reporter.h"
#include "train/training_loop.h"

namespace weft::train {
namespace {

namespace fs = std::filesystem;

// Resumes from the checkpoints weftd would list for the job.
class ResumingReporter : public testing::RecordingReporter {
 public:
  std::vector<std::string> ResumeFrom() const override { return resume; }
  std::vector<std::string> resume;
};

class ContinuedRunTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const std::string& d : dirs_) fs::remove_all(d);
  }
  // 512 samples in batches of 64: 8 steps an epoch. No periodic checkpoint.
  LoopOptions Options(int epochs, bool at_end) {
    auto spec = ParseManifest(absl::StrCat(
        R"(
name: continued
model: {architecture: mlp, hidden_units: [32]}
data: {train_samples: 512, test_samples: 200}
training: {threads: 1, batch_size: 64, epochs: )",
        epochs, "}\ncheckpoint: {every_seconds: 0, at_end: ", at_end ? "true" : "false", "}\n"));
    EXPECT_TRUE(spec.ok()) << spec.status();
    char tmpl[] = "/tmp/weft-continued-XXXXXX";
    dirs_.push_back(mkdtemp(tmpl));
    LoopOptions o;
    o.spec = *spec;
    o.learner.job_id = "job-continued";
    o.learner.data_dir = kDefaultDataPath;
    o.learner.result_dir = dirs_.back() + "/results";
    o.learner.checkpoint_dir = dirs_.back() + "/checkpoints";
    return o;
  }
  std::vector<std::string> dirs_;
};

TEST_F(ContinuedRunTest, ABudgetSpentIsTrainedOnFromItsLastStepWithoutRetraining) {
  // Without at_end nothing is checkpointed (no period either): nothing to go on from.
  ResumingReporter plain;
  ASSERT_TRUE(RunTraining(Options(1, /*at_end=*/false), plain).ok());
  EXPECT_TRUE(plain.checkpoints.empty());

  // Rung 0: one epoch, its last step checkpointed before the final model.
  LoopOptions first = Options(1, /*at_end=*/true);
  ResumingReporter rung0;
  auto one = RunTraining(first, rung0);
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_TRUE(one->succeeded) << one->reason;
  ASSERT_EQ(rung0.checkpoints.size(), 1u);
  ASSERT_EQ(rung0.checkpoints.begin()->first, 8);
  EXPECT_EQ(rung0.checkpoints.begin()->second.first,
            CheckpointPath(first.learner.checkpoint_dir, 8));

  // Promoted: the same job with three epochs, resumed from it.
  LoopOptions promoted = Options(3, /*at_end=*/true);
  promoted.learner.checkpoint_dir = first.learner.checkpoint_dir;
  ResumingReporter rung1;
  rung1.resume = {CheckpointPath(first.learner.checkpoint_dir, 8)};
  auto three = RunTraining(promoted, rung1);
  ASSERT_TRUE(three.ok()) << three.status();
  ASSERT_TRUE(three->succeeded) << three->reason;
  EXPECT_EQ(three->resumed_from_step, 8);
  std::vector<int> evaluated;
  for (const MetricSample& m : rung1.samples) {
    EXPECT_GT(m.step, 8) << "a step of the first epoch was trained again";
    if (m.test_accuracy) evaluated.push_back(m.epoch);
  }
  EXPECT_EQ(evaluated, (std::vector<int>{2, 3})) << "epoch 1 is neither trained nor evaluated";
  EXPECT_EQ(rung1.checkpoints.rbegin()->first, 24);

  // The same model as three epochs in one go.
  ResumingReporter straight;
  auto whole = RunTraining(Options(3, /*at_end=*/false), straight);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(three->final_test_accuracy, whole->final_test_accuracy);
  ASSERT_FALSE(rung1.samples.empty());
  ASSERT_FALSE(straight.samples.empty());
  EXPECT_EQ(rung1.samples.back().test_loss, straight.samples.back().test_loss)
      << "continued and uninterrupted runs end with the same parameters";
}

}  // namespace
}  // namespace weft::train
