// TrainingRun, what every built-in loop shares, on a real model and a real disk: the targets a
// checkpoint's common keys bring back, the delivered model written once and only by the rank that
// leads, training-loss reports, and a checkpoint the disk refuses (tolerated or not).
#include "train/training_run.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "common/fault_env.h"
#include "common/files.h"
#include "job/job_spec.h"
#include "job/layout.h"
#include "train/recording_reporter.h"

namespace weft::train {
namespace {

namespace fs = std::filesystem;
using testing::RecordingReporter;

class TrainingRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/weft-training-run-XXXXXX";
    dir_ = mkdtemp(tmpl);
    auto spec = ParseManifest(R"(
name: run
model: {architecture: mlp, hidden_units: [8]}
data: {train_samples: 12, test_samples: 6}
training: {epochs: 1, batch_size: 4}
targets: {deliver: 0.5, complete: 0.9}
)");
    ASSERT_TRUE(spec.ok()) << spec.status();
    options_.spec = *spec;
    options_.learner.job_id = "job-run";
    options_.learner.result_dir = dir_ + "/results";
    options_.learner.checkpoint_dir = dir_ + "/checkpoints";
    options_.env = &env_;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A run on 12 samples of 4 features in 3 classes, its model the manifest's MLP.
  std::unique_ptr<TrainingRun> NewRun(RecordingReporter& reporter) {
    Dataset train{torch::rand({12, 4}), torch::arange(12, torch::kInt64) % 3};
    Dataset test{torch::rand({6, 4}), torch::arange(6, torch::kInt64) % 3};
    auto model = BuildModel(options_.spec.model, "", {4}, 3);
    EXPECT_TRUE(model.ok()) << model.status();
    return std::make_unique<TrainingRun>(options_, reporter, *model, train, test);
  }

  std::string dir_;
  testing::FaultInjectionEnv env_;
  LoopOptions options_;
};

TEST_F(TrainingRunTest, TheDeliveredModelIsWrittenOnceAndACheckpointBringsTheTargetsBack) {
  RecordingReporter first;
  std::unique_ptr<TrainingRun> run = NewRun(first);
  run->progress().step = 7;
  absl::StatusOr<bool> complete = run->ActOnEvaluation({0.4, 1.2}, 1, /*leads=*/true);
  ASSERT_TRUE(complete.ok()) << complete.status();
  EXPECT_FALSE(*complete);
  EXPECT_TRUE(first.models.empty()) << "0.4 is below the deliver target";
  complete = run->ActOnEvaluation({0.6, 0.9}, 1, /*leads=*/true);
  ASSERT_TRUE(complete.ok()) << complete.status();
  EXPECT_FALSE(*complete);
  ASSERT_EQ(first.models.size(), 1u);
  EXPECT_EQ(first.models[0].kind, kDeliveredModel);
  EXPECT_DOUBLE_EQ(first.models[0].test_accuracy, 0.6);
  EXPECT_EQ(first.models[0].step, 7);
  EXPECT_TRUE(fs::exists(ModelPath(options_.learner.result_dir, kDeliveredModel)));
  ASSERT_EQ(first.samples.size(), 2u) << "each evaluation is reported";
  EXPECT_EQ(first.samples[1].test_accuracy, 0.6);

  // The common keys as a checkpoint holds them, read by the next attempt's run.
  std::ostringstream bytes;
  torch::serialize::OutputArchive out;
  run->WriteCommonKeys(out, 7);
  out.save_to(bytes);
  RecordingReporter second;
  std::unique_ptr<TrainingRun> resumed = NewRun(second);
  torch::serialize::InputArchive in;
  std::istringstream from(bytes.str());
  in.load_from(from);
  EXPECT_EQ(resumed->ReadCommonKeys(in), 7);
  EXPECT_TRUE(resumed->targets().delivered());
  EXPECT_DOUBLE_EQ(resumed->targets().best(), 0.6);
  EXPECT_DOUBLE_EQ(resumed->targets().last(), 0.6);

  complete = resumed->ActOnEvaluation({0.7, 0.8}, 2, /*leads=*/true);
  ASSERT_TRUE(complete.ok()) << complete.status();
  EXPECT_FALSE(*complete);
  EXPECT_TRUE(second.models.empty()) << "the model was delivered before the checkpoint";
  complete = resumed->ActOnEvaluation({0.95, 0.2}, 2, /*leads=*/true);
  ASSERT_TRUE(complete.ok()) << complete.status();
  EXPECT_TRUE(*complete);
  EXPECT_THAT(resumed->targets().BudgetReason(1), ::testing::HasSubstr("target met"));
}

TEST_F(TrainingRunTest, OnlyTheLeaderReportsAndWritesTheDeliveredModelButEveryRankMarksIt) {
  RecordingReporter reporter;
  std::unique_ptr<TrainingRun> run = NewRun(reporter);
  absl::StatusOr<bool> complete = run->ActOnEvaluation({0.6, 0.9}, 1, /*leads=*/false);
  ASSERT_TRUE(complete.ok()) << complete.status();
  EXPECT_TRUE(reporter.samples.empty());
  EXPECT_TRUE(reporter.models.empty());
  EXPECT_FALSE(fs::exists(ModelPath(options_.learner.result_dir, kDeliveredModel)));
  EXPECT_TRUE(run->targets().delivered()) << "rank 0 delivered it; no rank delivers again";
}

TEST_F(TrainingRunTest, TheTrainingLossIsReportedAsTheMeanSinceTheLastReport) {
  RecordingReporter reporter;
  std::unique_ptr<TrainingRun> run = NewRun(reporter);
  run->StartClocks();
  const double start = run->last_report_s();
  EXPECT_FALSE(run->ReportDue(start + 5, /*force=*/true)) << "no loss to report yet";
  run->AddLoss(1.0);
  run->AddLoss(3.0);
  EXPECT_FALSE(run->ReportDue(start + 0.5)) << "within a second of the last report";
  EXPECT_TRUE(run->ReportDue(start + 0.5, /*force=*/true));
  EXPECT_TRUE(run->ReportDue(start + 1.0));
  run->progress().step = 2;
  run->ReportLoss(1, 100, 2, start + 1.0);
  ASSERT_EQ(reporter.samples.size(), 1u);
  EXPECT_DOUBLE_EQ(reporter.samples[0].train_loss, 2.0);
  EXPECT_DOUBLE_EQ(reporter.samples[0].samples_per_s, 100);
  EXPECT_EQ(reporter.samples[0].step, 2);
  EXPECT_FALSE(reporter.samples[0].test_accuracy.has_value());
  EXPECT_DOUBLE_EQ(run->last_report_s(), start + 1.0);
  EXPECT_FALSE(run->ReportDue(start + 10)) << "the interval's losses were reported";
}

TEST_F(TrainingRunTest, ACheckpointTheDiskRefusesIsSkippedOnlyWhenToleratedAndNeverCommitted) {
  RecordingReporter reporter;
  std::unique_ptr<TrainingRun> run = NewRun(reporter);
  const std::string bytes(4096, 'x');
  env_.FailWrites("/ckpt-", 2);
  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<bool> written = run->CommitCheckpoint(bytes, 3, t0, /*tolerate=*/true);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_FALSE(*written);
  EXPECT_EQ(run->last_checkpoint_step(), -1);
  written = run->CommitCheckpoint(bytes, 3, t0, /*tolerate=*/false);
  EXPECT_TRUE(absl::IsResourceExhausted(written.status())) << written.status();
  EXPECT_TRUE(reporter.checkpoints.empty()) << "nothing the disk refused is committed";

  written = run->CommitCheckpoint(bytes, 3, t0, /*tolerate=*/false);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_TRUE(*written);
  EXPECT_EQ(run->last_checkpoint_step(), 3);
  ASSERT_EQ(reporter.checkpoints.count(3), 1u);
  const std::string path = CheckpointPath(options_.learner.checkpoint_dir, 3);
  EXPECT_EQ(reporter.checkpoints[3], std::make_pair(path, int64_t{4096}));
  EXPECT_EQ(*FileSize(path), 4096);
  EXPECT_EQ(fs::status(path).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write)
      << "owner-only";
}

}  // namespace
}  // namespace weft::train
