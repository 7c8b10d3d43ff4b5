// The learner's trainer (internal to train/): one job's model, optimizer, data and position,
// trained step by step with the gang. trainer.cc holds the loop (epochs, steps, evaluation,
// targets, reports), trainer_state.cc what outlives the process (checkpoints, restore, models).
// libtorch throws; the trainer's callers turn that into a Status (training_loop.cc).
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "train/audit_log.h"
#include "train/data_parallel.h"
#include "train/dataset.h"
#include "train/models.h"
#include "train/training_loop.h"

namespace weft::train {

using Model = std::shared_ptr<ClassifierImpl>;

struct Evaluation {
  double accuracy = 0;  // in [0, 1]
  double loss = 0;      // mean negative log-likelihood per sample
};

// Accuracy and mean loss of `model` over `test` (samples [N, ...]). With `dp` spanning
// several ranks each evaluates its contiguous 1/world_size of the split and the counts are
// summed, so every rank gets the same figures (and takes the same decisions on targets).
Evaluation Evaluate(const Model& model, const Dataset& test, DataParallel* dp = nullptr);

// libtorch's message without its C++ backtrace.
std::string TorchMessage(const std::exception& e);

class Trainer {
 public:
  Trainer(const LoopOptions& o, Reporter& r, Model model, Dataset train, Dataset test,
          std::unique_ptr<DataParallel> dp);
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  absl::StatusOr<LoopResult> Run();

 private:
  enum class EpochEnd { kDone, kComplete, kStopped };

  // --- trainer.cc ---
  std::unique_ptr<torch::optim::Optimizer> MakeOptimizer();
  // Every rank resumed from the same step, and all replicas take rank 0's parameters.
  absl::Status SyncGang();
  // Steps per epoch and the budget; logs the plan.
  void Plan();
  // Trains the rest of the epoch `epoch` (0-based) from epoch_offset_.
  absl::StatusOr<EpochEnd> TrainEpoch(int epoch);
  // One optimizer step on `block` (int64 [k]: the step's sample indices over all ranks, of which
  // this rank trains every world_size-th from its rank on); returns whether the gang must stop.
  bool Step(const torch::Tensor& block);
  void LogEpochTimes(int epoch);
  // Evaluates, reports, and acts on the targets. Sets *complete when the complete target is met.
  absl::Status EvaluateAndCheckTargets(bool* complete);
  void ReportTraining(bool force);
  // Rank 0 writes the final model; every rank says how it finished.
  absl::StatusOr<LoopResult> Finish(bool complete);
  bool StopRequested() const;
  // Another learner of the gang is gone mid-collective. This rank's state is that of the last
  // step every rank completed (a failed step is not applied), so rank 0 checkpoints it before
  // exiting and the gang's restart loses (almost) no steps. Returns Unavailable.
  absl::Status OnPeerLost(const PeerLostError& e);

  // --- trainer_state.cc ---
  // Restores the newest of the reporter's checkpoints that loads (a truncated or corrupt one is
  // logged and skipped); starts clean if none does. Returns the step it resumed from, or -1.
  absl::StatusOr<int64_t> ResumeFromCheckpoints();
  // Loads the training state from `path`. DataLoss if the file is truncated or corrupt.
  absl::Status Restore(const std::string& path);
  bool CheckpointDue() const;
  // Writes a checkpoint of the whole training state and commits it (rank 0 only). With
  // `tolerate_disk_errors` a write the disk refuses (full, I/O error) is logged and skipped: the
  // latest committed checkpoint stands and the next one is tried when due. Errors from
  // serialising, from the disk otherwise, and from weftd's commit.
  absl::Status Checkpoint(bool tolerate_disk_errors = false);
  // Writes and commits the `kind` model and its card. Errors from the disk or from weftd.
  absl::Status Export(const std::string& kind, double accuracy);
  // What the delivered model's forward takes, for its model card.
  std::string InputDescription() const;

  const LoopOptions& o_;
  const JobSpec& spec_;
  Env& env_;
  Reporter& reporter_;
  Model model_;
  Dataset train_, test_;
  int64_t classes_;  // NumClasses(train_, test_): the model's outputs
  std::unique_ptr<DataParallel> dp_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<AuditLog> audit_;  // rank 0's, when LoopOptions::audit_path is set

  int64_t steps_per_epoch_ = 0;
  ProgressReport progress_;
  int epoch_in_progress_ = 1;
  double loss_sum_ = 0;
  int64_t loss_steps_ = 0;
  int64_t samples_since_report_ = 0;
  double train_seconds_since_report_ = 0;
  double last_report_s_ = 0;
  double best_ = 0;
  double last_accuracy_ = 0;
  bool delivered_ = false;
  double complete_met_ = 0;
  // Samples of the epoch in progress trained so far, over all ranks: the length of the prefix of
  // the epoch's permutation that applied steps consumed. Independent of the world size.
  int64_t epoch_offset_ = 0;
  int64_t last_checkpoint_step_ = -1;
  // Steps of this epoch's loop in this process (after a resume: fewer than a whole epoch's).
  int64_t steps_this_run_ = 0;
  double epoch_train_seconds_ = 0;  // this epoch's time in training steps
  double last_checkpoint_s_ = 0;    // when a checkpoint was last written or attempted
  // An evaluation was due at progress_.step and has not finished: set while it runs, so a
  // checkpoint written when a peer is lost mid-evaluation makes the restart evaluate first.
  bool eval_pending_ = false;
  bool last_checkpoint_eval_pending_ = false;
};

}  // namespace weft::train
