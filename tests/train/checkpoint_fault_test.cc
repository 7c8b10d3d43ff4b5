// The learner against a full disk, on real data with real libtorch: a periodic checkpoint the
// disk refuses (ENOSPC) is skipped without losing the training run or leaving a partial file,
// and weftd is never asked to commit it; a final model the disk refuses fails the run with the
// disk's error and commits nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "common/fault_env.h"
#include "common/files.h"
#include "job/job_spec.h"
#include "job/layout.h"
#include "train/recording_reporter.h"
#include "train/training_loop.h"

namespace weft::train {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::RecordingReporter;

class CheckpointFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/weft-ckpt-fault-XXXXXX";
    dir_ = mkdtemp(tmpl);
    // 512 samples in batches of 64: 8 steps an epoch, 16 in all, a checkpoint every 2 steps.
    auto spec = ParseManifest(R"(
name: ckpt-fault
model: {architecture: mlp, hidden_units: [32]}
data: {train_samples: 512, test_samples: 200}
training: {epochs: 2, batch_size: 64, threads: 1}
checkpoint: {every_steps: 2, every_seconds: 0, keep: 2}
)");
    ASSERT_TRUE(spec.ok()) << spec.status();
    options_.spec = *spec;
    options_.learner.job_id = "job-ckpt-fault";
    options_.learner.data_dir = kDefaultDataPath;
    options_.learner.result_dir = dir_ + "/results";
    options_.learner.checkpoint_dir = dir_ + "/checkpoints";
    options_.env = &env_;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Files in `dir` whose name has `part`.
  int Count(const std::string& dir, const std::string& part) {
    int n = 0;
    if (!fs::exists(dir)) return 0;
    for (const auto& e : fs::directory_iterator(dir)) {
      n += e.path().filename().string().find(part) != std::string::npos;
    }
    return n;
  }

  std::string dir_;
  testing::FaultInjectionEnv env_;
  LoopOptions options_;
  RecordingReporter reporter_;
};

TEST_F(CheckpointFaultTest, AFullDiskSkipsPeriodicCheckpointsAndTrainingGoesOn) {
  env_.FailWrites("/ckpt-", 3);  // the checkpoints of steps 2, 4 and 6
  absl::StatusOr<LoopResult> result = RunTraining(options_, reporter_);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->succeeded) << result->reason;
  EXPECT_EQ(env_.injected(), 3);
  std::vector<int64_t> committed;
  for (const auto& [step, file] : reporter_.checkpoints) {
    committed.push_back(step);
    EXPECT_EQ(*FileSize(file.first), file.second) << "a committed checkpoint is whole";
    EXPECT_EQ(file.first, CheckpointPath(options_.learner.checkpoint_dir, step));
  }
  EXPECT_EQ(committed, (std::vector<int64_t>{8, 10, 12, 14, 16}))
      << "steps 2, 4, 6 hit the full disk and were never committed";
  EXPECT_EQ(Count(options_.learner.checkpoint_dir, ".tmp."), 0) << "no half-written file is left";
  EXPECT_EQ(Count(options_.learner.checkpoint_dir, "ckpt-"), 5);
  ASSERT_EQ(reporter_.models.size(), 1u);
  EXPECT_EQ(reporter_.models[0].kind, kFinalModel);
}

TEST_F(CheckpointFaultTest, AFullDiskFailsTheFinalModelWithTheDisksError) {
  env_.FailWrites("/final/model.pt", 1);
  absl::StatusOr<LoopResult> result = RunTraining(options_, reporter_);
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(result.status())) << result.status();
  EXPECT_THAT(std::string(result.status().message()), HasSubstr("No space left on device"));
  EXPECT_TRUE(reporter_.models.empty()) << "nothing weftd could not read back is committed";
  EXPECT_FALSE(fs::exists(ModelPath(options_.learner.result_dir, kFinalModel)));
  EXPECT_EQ(Count(ModelDir(options_.learner.result_dir, kFinalModel), ".tmp."), 0);
}

}  // namespace
}  // namespace weft::train
