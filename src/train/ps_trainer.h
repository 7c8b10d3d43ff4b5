// A learner of a `training.sync: ps` job (internal to train/): GaDei's scale-up parameter server
// (Zhang et al., HPDC 2017) in POSIX shared memory, or the parameters sharded over weft-ps
// servers (ps_link.h). Rank 0 starts the server from its checkpoint (creates the attempt's
// segment and runs the applier on a thread of its own, or initializes the weft-ps servers); every
// rank, rank 0 included, trains its share of each epoch at its own pace: pull the parameters,
// forward and backward on its next batch, push the gradient. Rank 0 also reports, evaluates,
// delivers, checkpoints the server's state and writes the final model; it closes the server at
// the end, and the others' next call then says so. The design and its guarantees are in
// docs/design.md ("The parameter server").
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "train/ps_link.h"
#include "train/training_run.h"

namespace weft::train {

// The segment's data order: learner r trains positions r, r + W, r + 2W, ... of each epoch's
// permutation (seed + epoch, as an allreduce gang draws it), batch_size at a time; its position p
// is batch p % BatchesPerEpoch of epoch p / BatchesPerEpoch.
class PsDataOrder {
 public:
  PsDataOrder(int64_t samples, int world, int rank, int64_t batch_size, uint64_t seed);
  // Batches of rank's share of one epoch (0 when it has no samples).
  int64_t BatchesPerEpoch() const { return batches_; }
  int64_t SamplesInShare() const { return share_; }
  // The sample indices (int64 [k], 1 <= k <= batch_size) of batch `position`.
  torch::Tensor Batch(int64_t position);
  // Samples of this share trained by `position` batches.
  int64_t SamplesBefore(int64_t position) const;

 private:
  int64_t samples_, world_, rank_, batch_size_;
  uint64_t seed_;
  int64_t share_, batches_;
  int64_t cached_epoch_ = -1;
  torch::Tensor cached_share_;
};

class PsTrainer {
 public:
  PsTrainer(const LoopOptions& o, Reporter& r, Model model, Dataset train, Dataset test);
  ~PsTrainer();
  PsTrainer(const PsTrainer&) = delete;
  PsTrainer& operator=(const PsTrainer&) = delete;

  absl::StatusOr<LoopResult> Run();

 private:
  // Makes the parameters views of one flat float tensor, and their gradients of another.
  // InvalidArgument for a model whose parameters are not all float32.
  absl::Status Flatten();
  // Rank 0: the newest checkpoint that loads (or the fresh model) into the server. Returns the
  // step resumed from, or -1.
  absl::StatusOr<int64_t> StartServer();
  // The server's state in the newest checkpoint that loads (no shards: none does).
  ps::ShardedState ResumeState(int64_t* step);
  // Trains this rank's share to its end, the complete target, or a stop. Returns how it ended.
  enum class End { kDone, kComplete, kStopped, kClosed };
  // `position`: where this learner's share goes on from (PsLink::Attach).
  absl::StatusOr<End> TrainShare(int64_t position);
  // Rank 0, between its steps and while it waits for the others: progress, metrics,
  // evaluations with their targets, checkpoints. Sets *complete at the complete target.
  absl::Status LeadJob(bool* complete);
  absl::Status EvaluateNow(bool* complete);
  absl::Status Checkpoint();
  // Rank 0 at the end: waits until every learner's share is applied (or a stop).
  absl::StatusOr<End> AwaitOthers(bool* complete);
  absl::StatusOr<LoopResult> FinishLeader(End end);
  // Progress of the whole job from the server's slot positions.
  absl::Status UpdateProgress();
  // Per slot: the batches of its share of the whole budget (epochs × its batches per epoch).
  std::vector<int64_t> Totals() const;
  int rank() const { return run_.options().learner.rank; }
  int world() const { return run_.options().learner.world_size; }

  TrainingRun run_;
  PsDataOrder order_;
  torch::Tensor params_, grads_;  // float [num_params]: the parameters' and gradients' storage
  int64_t timeout_ms_;
  std::unique_ptr<PsLink> link_;
  bool leader_ = false;          // rank 0: it started the server, and leads the job
  uint64_t published_here_ = 0;  // gradients this process published and had acknowledged
  // Rank 0's view of the job.
  std::vector<PsDataOrder> shares_;  // every slot's data order (its batches, its samples)
  std::vector<int64_t> positions_;   // every slot's position, as of UpdateProgress
  int evaluated_epochs_ = 0;
  int64_t evaluated_step_ = 0;
  int64_t last_report_samples_ = 0;  // the progress's samples at the last training report
};

}  // namespace weft::train
