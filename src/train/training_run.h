// One training run of a built-in model (internal to train/): what every built-in loop shares,
// whatever moves the parameters — an allreduce gang (Trainer) or a parameter server (PsTrainer):
// the job, its data and model, the progress, the two-tier targets with the delivered model, the
// training loss between reports, the checkpoint's common keys and its commit, and the models it
// exports. The loops own how a step is taken and where the data position is kept (an epoch
// offset for a gang, a position per share for the parameter server).
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "train/dataset.h"
#include "train/models.h"
#include "train/target_tracker.h"
#include "train/training_loop.h"

namespace weft::train {

class DataParallel;

using Model = std::shared_ptr<ClassifierImpl>;

struct Evaluation {
  double accuracy = 0;  // in [0, 1]
  double loss = 0;      // mean negative log-likelihood per sample
};

// Accuracy and mean loss of `model` over `test` (samples [N, ...]). With `dp` spanning
// several ranks each evaluates its contiguous 1/world_size of the split and the counts are
// summed, so every rank gets the same figures (and takes the same decisions on targets);
// PeerLost (data_parallel.h) if a rank is gone meanwhile.
absl::StatusOr<Evaluation> Evaluate(const Model& model, const Dataset& test,
                                    DataParallel* dp = nullptr);

// libtorch's message without its C++ backtrace.
std::string TorchMessage(const std::exception& e);

// Whether the learner was asked to stop: by a signal (o.stop_requested) or by weftd.
bool StopRequested(const LoopOptions& o, const Reporter& reporter);

// A model to write and commit: `kind` (kDeliveredModel, kFinalModel) of the job `options` runs.
struct ModelExport {
  const LoopOptions& options;
  Env& env;
  Reporter& reporter;
  ClassifierImpl& model;
  std::vector<int64_t> sample_shape;  // one sample's, for the model card
  int64_t classes = 0;
  std::string kind;
  double accuracy = 0;  // test accuracy of this model
  double best = 0;      // best test accuracy so far
  int epoch = 0;
  int64_t step = 0;
};
// Writes the model (TorchScript) and its model card atomically and asks weftd to commit them.
// Errors from the disk (the directory, the write) and from weftd's commit.
absl::Status ExportModel(const ModelExport& e);

// Thread-safety: none; the loop that holds it owns it.
class TrainingRun {
 public:
  TrainingRun(const LoopOptions& o, Reporter& r, Model model, Dataset train, Dataset test);
  TrainingRun(const TrainingRun&) = delete;
  TrainingRun& operator=(const TrainingRun&) = delete;

  const LoopOptions& options() const { return o_; }
  const JobSpec& spec() const { return o_.spec; }
  Env& env() const { return env_; }
  Reporter& reporter() const { return reporter_; }
  Model& model() { return model_; }
  const Dataset& train() const { return train_; }
  const Dataset& test() const { return test_; }
  int64_t classes() const { return classes_; }  // NumClasses(train, test): the model's outputs
  ProgressReport& progress() { return progress_; }
  const ProgressReport& progress() const { return progress_; }
  TargetTracker& targets() { return targets_; }
  const TargetTracker& targets() const { return targets_; }
  // Whether the learner was asked to stop: by a signal or by weftd.
  bool StopRequested() const { return train::StopRequested(o_, reporter_); }
  // Starts the report and checkpoint intervals (seconds) at now: the run begins training.
  void StartClocks();

  // --- training reports (the job's metrics are one learner's: rank 0's) ---
  // Adds one step's training loss (mean negative log-likelihood per sample of the step).
  void AddLoss(double loss);
  // Whether a training-loss report is due at `now_s` (seconds): a loss to report, and a second
  // since the last report unless `force`.
  bool ReportDue(double now_s, bool force = false) const;
  // Reports the mean training loss since the last report at `epoch` (1-based) with the
  // throughput `samples_per_s`, and starts the next interval at `now_s`.
  void ReportLoss(int epoch, double samples_per_s, int world_size, double now_s);
  double last_report_s() const { return last_report_s_; }

  // --- evaluations and the targets (TRADL) ---
  // Acts on evaluation `ev` of the model at `epoch` (1-based): the targets observe it; when
  // `leads` (rank 0) its test accuracy and loss are reported and, at the deliver target, the
  // delivered model is exported; every rank marks it delivered then. Returns whether the complete
  // target is met. Errors of Export.
  absl::StatusOr<bool> ActOnEvaluation(const Evaluation& ev, int epoch, bool leads);

  // --- checkpoints ---
  // Writes the keys every checkpoint of a run holds besides its loop's own: "step" (`step`),
  // "delivered", "best" and "last_accuracy" (the targets). Throws what libtorch throws.
  void WriteCommonKeys(torch::serialize::OutputArchive& ar, int64_t step) const;
  // Reads them back and restores the targets; returns the step. Throws what libtorch throws for
  // a key that is missing.
  int64_t ReadCommonKeys(torch::serialize::InputArchive& ar);
  // Writes `bytes` as the checkpoint of `step` (begun at `started`) under the learner's
  // checkpoint directory and asks weftd to commit it; `detail` is added to the log line. Returns
  // whether it was written and committed. A write the disk refuses (full, I/O error) is logged
  // and returns false when `tolerate_disk_errors` (the latest committed checkpoint stands), else
  // its error. Errors from weftd's commit.
  absl::StatusOr<bool> CommitCheckpoint(const std::string& bytes, int64_t step,
                                        std::chrono::steady_clock::time_point started,
                                        bool tolerate_disk_errors, const std::string& detail = "");
  // The step of the checkpoint last committed or resumed from (-1: none), and when the last
  // checkpoint was written or attempted (seconds).
  int64_t last_checkpoint_step() const { return last_checkpoint_step_; }
  void set_last_checkpoint_step(int64_t step) { last_checkpoint_step_ = step; }
  double last_checkpoint_s() const { return last_checkpoint_s_; }
  void RestartCheckpointClock();

  // --- models ---
  // Writes and commits the `kind` model (kDeliveredModel, kFinalModel) of test accuracy
  // `accuracy` and its card, at the progress's epoch and step (ExportModel).
  absl::Status Export(const std::string& kind, double accuracy);

 private:
  const LoopOptions& o_;
  Env& env_;
  Reporter& reporter_;
  Model model_;
  Dataset train_, test_;
  int64_t classes_;
  ProgressReport progress_;
  TargetTracker targets_;
  double loss_sum_ = 0;
  int64_t loss_steps_ = 0;
  double last_report_s_ = 0;
  double last_checkpoint_s_ = 0;
  int64_t last_checkpoint_step_ = -1;
};

}  // namespace weft::train
