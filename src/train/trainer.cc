// The training loop: epochs of this rank's share of the data, one optimizer step at a time with
// the gang, evaluation at epoch ends (and every eval_every_steps), two-tier targets (TRADL:
// deliver a model early, complete at the second target), metrics and progress to weftd.
#include "train/trainer.h"

#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "job/layout.h"
#include "train/fused_adam.h"

namespace weft::train {
namespace {

double NowS() { return SystemClock::Get().NowMs() / 1000.0; }

}  // namespace

Trainer::Trainer(const LoopOptions& o, Reporter& r, Model model, Dataset train, Dataset test,
                 std::unique_ptr<DataParallel> dp)
    : run_(o, r, std::move(model), std::move(train), std::move(test)), dp_(std::move(dp)) {}

std::unique_ptr<torch::optim::Optimizer> Trainer::MakeOptimizer() {
  const TrainingSpec& t = run_.spec().training;
  const double lr = run_.spec().ScaledLearningRate(world());
  if (t.optimizer == "sgd") {
    return std::make_unique<torch::optim::SGD>(
        run_.model()->parameters(),
        torch::optim::SGDOptions(lr).momentum(t.momentum).weight_decay(t.weight_decay));
  }
  return std::make_unique<FusedAdam>(run_.model()->parameters(),
                                     torch::optim::AdamOptions(lr).weight_decay(t.weight_decay));
}

absl::Status Trainer::SyncGang() {
  if (world() <= 1) return absl::OkStatus();
  ASSIGN_OR_RETURN(const bool same_step, dp_->AllEqual(run_.progress().step));
  if (!same_step) {
    return absl::InternalError(absl::StrCat(
        "the job's learners resumed from different steps (this rank: ", run_.progress().step,
        "); restarting from the checkpoints again"));
  }
  std::vector<torch::Tensor> state = run_.model()->parameters();
  for (const torch::Tensor& b : run_.model()->buffers()) state.push_back(b);
  return dp_->BroadcastFromRank0(state);
}

void Trainer::Plan() {
  // Each step trains the next batch_size × world_size samples of the epoch's permutation, dealt
  // round-robin to the ranks; the last step of an epoch takes what is left, so every sample of
  // every epoch is trained exactly once.
  const TrainingSpec& t = run_.spec().training;
  const int64_t n = run_.train().size();
  const int64_t global = GlobalBatch();
  steps_per_epoch_ = (n + global - 1) / global;
  ProgressReport& progress = run_.progress();
  progress.epochs_total = t.epochs;
  // The steps taken so far (at whatever world sizes the job had) and those left at this one: the
  // rest of the epoch in progress from its offset, then whole epochs. An elastic job's total
  // changes with its world size, and its progress reaches 100 % exactly at the end.
  const int64_t epochs_after = std::max(0, t.epochs - progress.epoch - 1);
  const int64_t left_in_epoch =
      progress.epoch < t.epochs ? (n - epoch_offset_ + global - 1) / global : 0;
  progress.steps_total = progress.step + left_in_epoch + epochs_after * steps_per_epoch_;
  spdlog::info(
      "training {} on {} samples, {} test samples, batch {} per learner ({} in all), {} steps "
      "per epoch, {} epochs, {} threads, learning rate {:g}",
      run_.spec().model.architecture, n, run_.test().size(), t.batch_size, global, steps_per_epoch_,
      t.epochs, torch::get_num_threads(), run_.spec().ScaledLearningRate(world()));
}

void Trainer::ReportTraining(bool force) {
  if (rank() != 0) return;  // metrics are the job's, reported once
  const double now = NowS();
  if (!run_.ReportDue(now, force)) return;
  run_.ReportLoss(
      epoch_in_progress_,
      train_seconds_since_report_ > 0 ? samples_since_report_ / train_seconds_since_report_ : 0,
      static_cast<int>(world()), now);
  samples_since_report_ = 0;
  train_seconds_since_report_ = 0;
}

absl::StatusOr<bool> Trainer::EvaluateAndCheckTargets() {
  ReportTraining(/*force=*/true);
  ASSIGN_OR_RETURN(const Evaluation ev, Evaluate(run_.model(), run_.test(), dp_.get()));
  spdlog::info("evaluation: epoch {} step {} test_accuracy {:.4f} test_loss {:.4f}",
               epoch_in_progress_, run_.progress().step, ev.accuracy, ev.loss);
  // Every rank evaluated the same figures (Evaluate sums over ranks), so all take the same
  // decisions on the targets; only rank 0 reports them and writes the model.
  return run_.ActOnEvaluation(ev, epoch_in_progress_, rank() == 0);
}

absl::StatusOr<bool> Trainer::Step(const torch::Tensor& block) {
  auto t0 = std::chrono::steady_clock::now();
  const int64_t ranks = world();
  // This rank's part: positions rank, rank + world, … of the block (counts differ by at most 1).
  torch::Tensor idx = block.slice(0, rank(), block.size(0), ranks);
  const int64_t n = idx.size(0);
  // The allreduce averages over ranks; weighting each rank's mean loss by its share of the block
  // makes that the mean over the whole block (weight 1 in every full step). A rank with no share
  // (a block shorter than the world) runs one sample at weight 0, so it has the same gradients
  // defined as its peers and contributes zeros.
  const double weight = static_cast<double>(n) * ranks / block.size(0);
  if (n == 0) idx = block.slice(0, 0, 1);
  torch::Tensor x = run_.train().Batch(idx);
  torch::Tensor y = run_.train().labels.index_select(0, idx);
  optimizer_->zero_grad();
  // Every rank learns whether any was asked to stop from the step's last collective, so all
  // stop after this same step.
  // and whether any knows the job moved to a later generation (it grew), so all re-form after it.
  dp_->BeginStep(run_.StopRequested(),
                 run_.spec().resources.elastic && run_.reporter().Generation() > generation_);
  torch::Tensor loss = torch::nll_loss(run_.model()->forward(x), y);
  (weight == 1.0 ? loss : loss * weight).backward();
  ASSIGN_OR_RETURN(const bool stop, dp_->FinishStep());
  optimizer_->step();
  if (n > 0) run_.AddLoss(loss.item<double>());
  ++run_.progress().step;
  run_.progress().samples += block.size(0);
  samples_since_report_ += block.size(0);
  if (audit_) audit_->Step(run_.progress().step, epoch_in_progress_, block);
  last_block_ = block;
  last_block_epoch_ = epoch_in_progress_;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  train_seconds_since_report_ += seconds;
  epoch_train_seconds_ += seconds;
  return stop;
}

absl::StatusOr<Trainer::End> Trainer::TrainEpoch(int epoch) {
  epoch_in_progress_ = epoch + 1;
  // Every rank draws the same permutation: seed + epoch.
  auto gen = at::detail::createCPUGenerator(run_.spec().training.seed * 1000003 + epoch);
  torch::Tensor perm =
      torch::randperm(run_.train().size(), gen, torch::TensorOptions().dtype(torch::kInt64));
  // The permutation from epoch_offset_ on, block by block. The samples before the offset were
  // trained by applied steps, whatever the world size then: a gang restarted at another size
  // (an elastic job) picks the epoch up at that sample.
  const int64_t n = run_.train().size();
  const int64_t global = GlobalBatch();
  const int64_t start = epoch_offset_;
  const int64_t steps = (n - start + global - 1) / global;
  steps_this_run_ = steps;
  if (audit_) audit_->BeginEpoch(epoch_in_progress_, n);
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t end = std::min(n, start + (s + 1) * global);
    ASSIGN_OR_RETURN(const bool stop, Step(perm.slice(0, start + s * global, end)));
    epoch_offset_ = end;
    if (stop) {
      // Keep what was trained: halt and preemption resume from here.
      ReportTraining(/*force=*/true);
      absl::Status saved = Checkpoint();
      if (!saved.ok()) spdlog::warn("no checkpoint on stop: {}", saved.message());
      return End{End::kStopped};
    }
    ReportTraining(/*force=*/false);
    if (CheckpointDue()) RETURN_IF_ERROR(Checkpoint(/*tolerate_disk_errors=*/true));
    const int64_t every = run_.spec().training.eval_every_steps;
    if (every > 0 && run_.progress().step % every == 0 && s + 1 < steps) {
      eval_pending_ = true;
      ASSIGN_OR_RETURN(const bool complete, EvaluateAndCheckTargets());
      eval_pending_ = false;
      if (complete) return End{End::kComplete};
    }
    // Every rank saw the same flag: all leave the epoch here and re-enter it in the new group.
    if (dp_->regroup_requested()) {
      // A rank weftd has not told yet knows only that another was: the job moved on.
      const int64_t told = run_.reporter().Generation();
      return End{End::kRegroup, told > generation_
                                    ? absl::StrCat("the job moved to generation ", told)
                                    : "another learner was told of a new generation"};
    }
  }
  run_.progress().epoch = epoch + 1;
  LogEpochTimes(epoch);
  epoch_offset_ = 0;
  eval_pending_ = true;
  ASSIGN_OR_RETURN(const bool complete, EvaluateAndCheckTargets());
  eval_pending_ = false;
  return End{complete ? End::kComplete : End::kDone};
}

void Trainer::LogEpochTimes(int epoch) {
  if (world() > 1) {
    const int64_t steps = std::max<int64_t>(1, steps_this_run_);
    const double wait_ms = dp_->TakeWaitMs();
    spdlog::info(
        "epoch {}: {:.1f} ms per step, of which {:.1f} ms waiting for the gradient allreduce "
        "after the backward pass ({:.1f}%)",
        epoch + 1, 1000 * epoch_train_seconds_ / steps, wait_ms,
        100 * wait_ms * steps / std::max(1e-9, 1000 * epoch_train_seconds_));
  }
  epoch_train_seconds_ = 0;
}

absl::Status Trainer::OnPeerLost(const std::string& what) {
  spdlog::warn("lost a peer learner at step {}: {}", run_.progress().step, what);
  if (rank() == 0) {
    absl::Status saved = Checkpoint();
    if (saved.ok()) {
      spdlog::info(
          "checkpointed step {}, the last step all learners completed, for the gang's restart",
          run_.progress().step);
    } else {
      spdlog::warn("no checkpoint after losing a peer: {}", saved.message());
    }
  }
  return absl::UnavailableError(absl::StrCat("a peer learner of the gang is gone (", what, ")"));
}

absl::StatusOr<LoopResult> Trainer::Finish() {
  {
    // Replicas must agree bit for bit; the sum of all parameters shows it in each rank's log.
    torch::NoGradGuard no_grad;
    double checksum = 0;
    for (const torch::Tensor& p : run_.model()->parameters()) {
      checksum += p.to(torch::kFloat64).sum().item<double>();
    }
    spdlog::info("parameters checksum {:.10e} at step {}", checksum, run_.progress().step);
  }
  LoopResult result;
  if (rank() != 0) {
    result.reason = absl::StrFormat("rank %d of %d done at step %d; rank 0 writes the final model",
                                    rank(), world(), run_.progress().step);
  } else {
    result.reason = run_.targets().BudgetReason(run_.spec().training.epochs);
  }
  if (run_.spec().checkpoint.at_end) RETURN_IF_ERROR(Checkpoint());  // rank 0's, at this step
  if (rank() == 0) RETURN_IF_ERROR(run_.Export(kFinalModel, run_.targets().last()));
  result.succeeded = true;
  result.best_test_accuracy = run_.targets().best();
  result.final_test_accuracy = run_.targets().last();
  return result;
}

absl::StatusOr<Trainer::End> Trainer::TrainToEnd() {
  if (eval_pending_) {
    // The gang lost a learner during this evaluation: do it now, before training on.
    epoch_in_progress_ = epoch_offset_ == 0 ? run_.progress().epoch : run_.progress().epoch + 1;
    spdlog::info("evaluating step {} first: its evaluation was interrupted", run_.progress().step);
    ASSIGN_OR_RETURN(const bool complete, EvaluateAndCheckTargets());
    eval_pending_ = false;
    if (complete) return End{End::kComplete};
  }
  for (int epoch = run_.progress().epoch; epoch < run_.spec().training.epochs; ++epoch) {
    ASSIGN_OR_RETURN(End end, TrainEpoch(epoch));
    if (end.kind != End::kDone) return end;
  }
  return End{End::kDone};
}

LoopResult Trainer::Stopped(const std::string& why, int64_t resumed_from) const {
  LoopResult result;
  result.stopped = true;
  result.reason = why;
  result.best_test_accuracy = run_.targets().best();
  result.resumed_from_step = resumed_from;
  return result;
}

absl::StatusOr<LoopResult> Trainer::Run() {
  optimizer_ = MakeOptimizer();
  int64_t resumed_from = -1;
  if (run_.options().learner.generation > 1) {
    // Joining a running elastic job: its group's rank 0 hands over the training state.
    generation_ = run_.options().learner.generation;
    RETURN_IF_ERROR(TakeRank0State());
    spdlog::info("joined generation {} as rank {} of {} at step {} ({} samples into epoch {})",
                 generation_, rank(), world(), run_.progress().step, epoch_offset_,
                 run_.progress().epoch + 1);
  } else {
    ASSIGN_OR_RETURN(resumed_from, ResumeFromCheckpoints());
    RETURN_IF_ERROR(SyncGang());
    RETURN_IF_ERROR(OpenAudit());
    Plan();
  }
  dp_->AttachGradientHooks(run_.model()->parameters());
  // A collective stuck on a peer that died without a word is given up once weftd has moved an
  // elastic job on (rather than held for its whole timeout while the new generation forms) or
  // once this learner was asked to stop: weftd stops a fixed gang's survivors when one of them
  // dies, and rank 0 checkpoints the last step all completed before its SIGKILL is due.
  const bool elastic = run_.spec().resources.elastic;
  dp_->set_give_up([this, elastic]() -> std::string {
    if (elastic && run_.reporter().Generation() > generation_) {
      return "weftd moved the job to a later generation";
    }
    if (run_.StopRequested()) return "this learner was asked to stop";
    return "";
  });
  run_.model()->train();
  run_.StartClocks();
  for (;;) {
    // Why the group re-forms in place, and what a fixed gang's restart would name instead.
    std::string why, lost;
    absl::StatusOr<End> end = TrainToEnd();
    if (end.ok()) {
      if (end->kind == End::kStopped) return Stopped("stopped on request", resumed_from);
      if (end->kind != End::kRegroup) break;
      why = lost = end->why;
    } else if (IsPeerLost(end.status())) {
      lost = std::string(end.status().message());
      if (!run_.spec().resources.elastic) return OnPeerLost(lost);
      why = absl::StrCat("lost a peer learner (", lost, ")");
    } else {
      return end.status();
    }
    // The throughput since the last report was this generation's: reported before the world
    // size changes, so weftd's job model never files one size's speed under another's.
    ReportTraining(/*force=*/true);
    absl::StatusOr<bool> member = Regroup(why);
    if (!member.ok()) {
      spdlog::warn("cannot regroup in place: {}", member.status().message());
      return OnPeerLost(lost);
    }
    if (!*member) return Stopped("left the job's group at weftd's request", resumed_from);
  }
  ASSIGN_OR_RETURN(LoopResult result, Finish());
  result.resumed_from_step = resumed_from;
  return result;
}

}  // namespace weft::train
