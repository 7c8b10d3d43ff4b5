// The learner of an allreduce gang (internal to train/): one job's run (TrainingRun: model,
// data, progress, targets, reports, models) with its optimizer and its position in the epoch,
// trained step by step with the gang. trainer.cc holds the loop (epochs, steps, evaluations),
// trainer_state.cc what outlives the process (checkpoints and restore), trainer_membership.cc
// an elastic job's regroup in place. libtorch throws; the trainer's callers turn that into a
// Status (training_loop.cc).
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
#include "train/training_run.h"

namespace weft::train {

// Where a gang's keys lie in rank 0's rendezvous store, which takes any connection (c10d's
// TCPStore has no authentication): "JOB/attempt-N/SECRET/", SECRET being 32 hex characters of
// HMAC-SHA256(the attempt's credential, "gloo-rendezvous"), so that only the attempt's learners
// can name a key there (the store cannot list its keys) — not a learner of another attempt or
// job, nor anyone else who reaches the port. An elastic job's generation `generation` (> 0) has
// "gen-G/" below that.
std::string RendezvousPrefix(const LearnerLaunch& learner, int64_t generation = 0);

// How long a learner waits in the store for a new generation's other members (milliseconds): the
// running members join within a heartbeat and a step; past it, it asks weftd again.
inline constexpr int64_t kReformWaitMs = 10000;
// How long a learner joining a running job waits for its members: they notice the generation at
// their next heartbeat, then finish the step (or an evaluation) in flight.
inline constexpr int64_t kJoinWaitMs = 30000;

// A learner started to join a running elastic job (launch.generation > 1), its data and model
// loaded: tells weftd it is ready and polls until weftd says which generation to join, as which
// rank (kJoinWaitMs at most). Aborted when weftd says stop or `stop_requested` is set;
// Unavailable when it would be rank 0 (no member with the job's state is left); errors of
// Reporter::Regroup.
absl::StatusOr<Membership> AwaitJoin(Reporter& reporter, const LearnerLaunch& launch,
                                     const std::atomic<bool>* stop_requested);

class Trainer {
 public:
  Trainer(const LoopOptions& o, Reporter& r, Model model, Dataset train, Dataset test,
          std::unique_ptr<DataParallel> dp);
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  absl::StatusOr<LoopResult> Run();

 private:
  // How an epoch, or the training to the end of the budget, ended: done, at the complete target,
  // stopped on request, or at a step after which the job's group re-forms in a later generation
  // (`why`: the job grew, or another learner was told so); every rank ends the same way.
  struct End {
    enum Kind { kDone, kComplete, kStopped, kRegroup };
    explicit End(Kind k, std::string w = "") : kind(k), why(std::move(w)) {}
    Kind kind;
    std::string why;
  };

  // --- trainer.cc ---
  std::unique_ptr<torch::optim::Optimizer> MakeOptimizer();
  // Every rank resumed from the same step, and all replicas take rank 0's parameters.
  absl::Status SyncGang();
  // Steps per epoch and the budget; logs the plan.
  void Plan();
  // Trains the rest of the epoch `epoch` (0-based) from epoch_offset_.
  absl::StatusOr<End> TrainEpoch(int epoch);
  // One optimizer step on `block` (int64 [k]: the step's sample indices over all ranks, of which
  // this rank trains every world_size-th from its rank on); returns whether the gang must stop.
  // PeerLost if another rank is gone (the step is not applied).
  absl::StatusOr<bool> Step(const torch::Tensor& block);
  void LogEpochTimes(int epoch);
  // Evaluates, reports, and acts on the targets. Returns whether the complete target is met.
  absl::StatusOr<bool> EvaluateAndCheckTargets();
  void ReportTraining(bool force);
  // Rank 0 writes the final model; every rank says how it finished.
  absl::StatusOr<LoopResult> Finish();
  // Another learner of the gang is gone mid-collective. This rank's state is that of the last
  // step every rank completed (a failed step is not applied), so rank 0 checkpoints it before
  // exiting and the gang's restart loses (almost) no steps. Returns Unavailable naming `what`.
  absl::Status OnPeerLost(const std::string& what);
  // Trains from the current position to the end of the budget, the complete target, a stop or a
  // regroup (a pending evaluation first). PeerLost if another rank is gone.
  absl::StatusOr<End> TrainToEnd();
  // The result of a learner that stops before the end (`why`), having resumed from step
  // `resumed_from`.
  LoopResult Stopped(const std::string& why, int64_t resumed_from) const;
  // This rank's rank and the world size in the current group.
  int rank() const { return dp_->rank(); }
  int world() const { return dp_->world_size(); }
  // Samples one step trains over all ranks: training.batch_size per learner × the world size.
  int64_t GlobalBatch() const { return run_.spec().training.batch_size * world(); }

  // --- trainer_membership.cc ---
  // An elastic job's learner lost a peer or saw the job grow (`why`): asks weftd for the new
  // generation, re-forms the
  // group in place and takes rank 0's training state (parameters, buffers, optimizer state,
  // position, RNG). True when this learner trains on; false when weftd says it is no longer a
  // member. Errors (weftd undecided within the regroup timeout, unreachable, a group that does
  // not form): the caller falls back to a fixed gang's restart.
  absl::StatusOr<bool> Regroup(const std::string& why);
  // One attempt at joining `m`'s generation and taking rank 0's state. Unavailable (PeerLost
  // among them) when a member is gone while the group forms.
  absl::Status Rejoin(const Membership& m);
  // After joining a group: every member takes rank 0's training state; the learning rate
  // follows the new world size; rank 0 keeps the audit. PeerLost if a member is gone.
  absl::Status TakeRank0State();
  // Rank 0 of the current group opens the audit (if any) and records where the lineage resumes.
  absl::Status OpenAudit();

  // --- trainer_state.cc ---
  // Restores the newest of the reporter's checkpoints that loads (a truncated or corrupt one is
  // logged and skipped); starts clean if none does. Returns the step it resumed from, or -1.
  absl::StatusOr<int64_t> ResumeFromCheckpoints();
  // Loads the training state from `path`. DataLoss if the file is truncated or corrupt.
  absl::Status Restore(const std::string& path);
  // Loads the training state SerializeState() gave rank 0. DataLoss if it does not load.
  absl::Status RestoreFromBytes(const std::string& bytes);
  absl::Status LoadState(torch::serialize::InputArchive& ar, const std::string& path);
  // The whole training state as a checkpoint holds it. Internal if serialising fails.
  absl::StatusOr<std::string> SerializeState();
  bool CheckpointDue() const;
  // Writes a checkpoint of the whole training state and commits it (rank 0 only). With
  // `tolerate_disk_errors` a write the disk refuses (full, I/O error) is logged and skipped: the
  // latest committed checkpoint stands and the next one is tried when due. Errors from
  // serialising, from the disk otherwise, and from weftd's commit.
  absl::Status Checkpoint(bool tolerate_disk_errors = false);

  TrainingRun run_;
  std::unique_ptr<DataParallel> dp_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<AuditLog> audit_;  // rank 0's, when LoopOptions::audit_path is set

  int64_t steps_per_epoch_ = 0;
  int epoch_in_progress_ = 1;
  int64_t samples_since_report_ = 0;
  double train_seconds_since_report_ = 0;
  // Samples of the epoch in progress trained so far, over all ranks: the length of the prefix of
  // the epoch's permutation that applied steps consumed. Independent of the world size.
  int64_t epoch_offset_ = 0;
  // Steps of this epoch's loop in this process (after a resume: fewer than a whole epoch's).
  int64_t steps_this_run_ = 0;
  double epoch_train_seconds_ = 0;  // this epoch's time in training steps
  // An evaluation was due at the progress's step and has not finished: set while it runs, so a
  // checkpoint written when a peer is lost mid-evaluation makes the restart evaluate first.
  bool eval_pending_ = false;
  bool last_checkpoint_eval_pending_ = false;
  // The membership generation of the group this learner trains in (1 as started; an elastic job
  // moves on in place when it loses a learner).
  int64_t generation_ = 1;
  // The sample indices (int64 [k]) and epoch of the last step this learner applied itself, for
  // its audit record should it become rank 0 (the rank 0 that recorded steps may have died before
  // recording that one); undefined after taking another rank's state.
  torch::Tensor last_block_;
  int last_block_epoch_ = 0;
};

}  // namespace weft::train
