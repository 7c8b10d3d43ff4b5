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

constexpr double kReportIntervalS = 1.0;

double NowS() { return SystemClock::Get().NowMs() / 1000.0; }

}  // namespace

Trainer::Trainer(const LoopOptions& o, Reporter& r, Model model, Dataset train, Dataset test,
                 std::unique_ptr<DataParallel> dp)
    : o_(o),
      spec_(o.spec),
      env_(o.env ? *o.env : Env::Default()),
      reporter_(r),
      model_(std::move(model)),
      train_(std::move(train)),
      test_(std::move(test)),
      classes_(NumClasses(train_, test_)),
      dp_(std::move(dp)),
      targets_(spec_.targets) {}

bool StopRequested(const LoopOptions& o, const Reporter& reporter) {
  return (o.stop_requested && o.stop_requested->load()) || !reporter.KeepRunning();
}

bool Trainer::StopRequested() const { return train::StopRequested(o_, reporter_); }

std::unique_ptr<torch::optim::Optimizer> Trainer::MakeOptimizer() {
  double lr = spec_.ScaledLearningRate(world());
  if (spec_.training.optimizer == "sgd") {
    return std::make_unique<torch::optim::SGD>(model_->parameters(),
                                               torch::optim::SGDOptions(lr)
                                                   .momentum(spec_.training.momentum)
                                                   .weight_decay(spec_.training.weight_decay));
  }
  return std::make_unique<FusedAdam>(
      model_->parameters(),
      torch::optim::AdamOptions(lr).weight_decay(spec_.training.weight_decay));
}

absl::Status Trainer::SyncGang() {
  if (world() <= 1) return absl::OkStatus();
  if (!dp_->AllEqual(progress_.step)) {
    return absl::InternalError(
        absl::StrCat("the job's learners resumed from different steps (this rank: ", progress_.step,
                     "); restarting from the checkpoints again"));
  }
  std::vector<torch::Tensor> state = model_->parameters();
  for (const torch::Tensor& b : model_->buffers()) state.push_back(b);
  dp_->BroadcastFromRank0(state);
  return absl::OkStatus();
}

void Trainer::Plan() {
  // Each step trains the next batch_size × world_size samples of the epoch's permutation, dealt
  // round-robin to the ranks; the last step of an epoch takes what is left, so every sample of
  // every epoch is trained exactly once.
  const int64_t bs = spec_.training.batch_size;
  const int64_t global = bs * world();
  steps_per_epoch_ = (train_.size() + global - 1) / global;
  progress_.epochs_total = spec_.training.epochs;
  // The steps taken so far (at whatever world sizes the job had) and those left at this one: the
  // rest of the epoch in progress from its offset, then whole epochs. An elastic job's total
  // changes with its world size, and its progress reaches 100 % exactly at the end.
  const int64_t epochs_after = std::max(0, spec_.training.epochs - progress_.epoch - 1);
  const int64_t left_in_epoch = progress_.epoch < spec_.training.epochs
                                    ? (train_.size() - epoch_offset_ + global - 1) / global
                                    : 0;
  progress_.steps_total = progress_.step + left_in_epoch + epochs_after * steps_per_epoch_;
  spdlog::info(
      "training {} on {} samples, {} test samples, batch {} per learner ({} in all), {} steps "
      "per epoch, {} epochs, {} threads, learning rate {:g}",
      spec_.model.architecture, train_.size(), test_.size(), bs, global, steps_per_epoch_,
      spec_.training.epochs, torch::get_num_threads(), spec_.ScaledLearningRate(world()));
}

void Trainer::ReportTraining(bool force) {
  if (rank() != 0) return;  // metrics are the job's, reported once
  double now = NowS();
  if (!force && now - last_report_s_ < kReportIntervalS) return;
  if (loss_steps_ == 0) return;
  MetricSample m;
  m.step = progress_.step;
  m.epoch = epoch_in_progress_;
  m.wall_time_ms = SystemClock::Get().NowMs();
  m.train_loss = loss_sum_ / loss_steps_;
  m.samples_per_s =
      train_seconds_since_report_ > 0 ? samples_since_report_ / train_seconds_since_report_ : 0;
  reporter_.Report(m, progress_);
  loss_sum_ = 0;
  loss_steps_ = 0;
  samples_since_report_ = 0;
  train_seconds_since_report_ = 0;
  last_report_s_ = now;
}

absl::Status Trainer::EvaluateAndCheckTargets(bool* complete) {
  ReportTraining(/*force=*/true);
  Evaluation ev = Evaluate(model_, test_, dp_.get());
  const TargetTracker::Decision decision = targets_.Observe(ev.accuracy);
  spdlog::info("evaluation: epoch {} step {} test_accuracy {:.4f} test_loss {:.4f}",
               epoch_in_progress_, progress_.step, ev.accuracy, ev.loss);
  if (rank() == 0) {
    MetricSample m;
    m.step = progress_.step;
    m.epoch = epoch_in_progress_;
    m.wall_time_ms = SystemClock::Get().NowMs();
    m.test_accuracy = ev.accuracy;
    m.test_loss = ev.loss;
    reporter_.Report(m, progress_);
  }
  // Every rank evaluated the same figures (Evaluate sums over ranks), so all take the same
  // decisions here; only rank 0 writes the model.
  if (decision.deliver) {
    spdlog::info("deliver target met: test_accuracy {:.4f} >= {}", ev.accuracy,
                 *spec_.targets.deliver);
    if (rank() == 0) RETURN_IF_ERROR(Export(kDeliveredModel, ev.accuracy));
    targets_.MarkDelivered();
  }
  if (decision.complete) *complete = true;
  return absl::OkStatus();
}

bool Trainer::Step(const torch::Tensor& block) {
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
  torch::Tensor x = train_.Batch(idx);
  torch::Tensor y = train_.labels.index_select(0, idx);
  optimizer_->zero_grad();
  // Every rank learns whether any was asked to stop from the step's last collective, so all
  // stop after this same step.
  // and whether any knows the job moved to a later generation (it grew), so all re-form after it.
  dp_->BeginStep(StopRequested(), spec_.resources.elastic && reporter_.Generation() > generation_);
  torch::Tensor loss = torch::nll_loss(model_->forward(x), y);
  (weight == 1.0 ? loss : loss * weight).backward();
  const bool stop = dp_->FinishStep();
  optimizer_->step();
  if (n > 0) {
    loss_sum_ += loss.item<double>();
    ++loss_steps_;
  }
  ++progress_.step;
  progress_.samples += block.size(0);
  samples_since_report_ += block.size(0);
  if (audit_) audit_->Step(progress_.step, epoch_in_progress_, block);
  last_block_ = block;
  last_block_epoch_ = epoch_in_progress_;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  train_seconds_since_report_ += seconds;
  epoch_train_seconds_ += seconds;
  return stop;
}

absl::StatusOr<Trainer::EpochEnd> Trainer::TrainEpoch(int epoch) {
  epoch_in_progress_ = epoch + 1;
  // Every rank draws the same permutation: seed + epoch.
  auto gen = at::detail::createCPUGenerator(spec_.training.seed * 1000003 + epoch);
  torch::Tensor perm =
      torch::randperm(train_.size(), gen, torch::TensorOptions().dtype(torch::kInt64));
  // The permutation from epoch_offset_ on, block by block. The samples before the offset were
  // trained by applied steps, whatever the world size then: a gang restarted at another size
  // (an elastic job) picks the epoch up at that sample.
  const int64_t n = train_.size();
  const int64_t global = spec_.training.batch_size * world();
  const int64_t start = epoch_offset_;
  const int64_t steps = (n - start + global - 1) / global;
  steps_this_run_ = steps;
  if (audit_) audit_->BeginEpoch(epoch_in_progress_, n);
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t end = std::min(n, start + (s + 1) * global);
    const bool stop = Step(perm.slice(0, start + s * global, end));
    epoch_offset_ = end;
    if (stop) {
      // Keep what was trained: halt and preemption resume from here.
      ReportTraining(/*force=*/true);
      absl::Status saved = Checkpoint();
      if (!saved.ok()) spdlog::warn("no checkpoint on stop: {}", saved.message());
      return EpochEnd::kStopped;
    }
    ReportTraining(/*force=*/false);
    if (CheckpointDue()) RETURN_IF_ERROR(Checkpoint(/*tolerate_disk_errors=*/true));
    const int64_t every = spec_.training.eval_every_steps;
    if (every > 0 && progress_.step % every == 0 && s + 1 < steps) {
      bool complete = false;
      eval_pending_ = true;
      RETURN_IF_ERROR(EvaluateAndCheckTargets(&complete));
      eval_pending_ = false;
      if (complete) return EpochEnd::kComplete;
    }
    // Every rank saw the same flag: all leave the epoch here and re-enter it in the new group.
    if (dp_->regroup_requested()) {
      // A rank weftd has not told yet knows only that another was: the job moved on.
      const int64_t told = reporter_.Generation();
      throw RegroupRequest(told > generation_
                               ? absl::StrCat("the job moved to generation ", told)
                               : std::string("another learner was told of a new generation"));
    }
  }
  progress_.epoch = epoch + 1;
  LogEpochTimes(epoch);
  epoch_offset_ = 0;
  bool complete = false;
  eval_pending_ = true;
  RETURN_IF_ERROR(EvaluateAndCheckTargets(&complete));
  eval_pending_ = false;
  return complete ? EpochEnd::kComplete : EpochEnd::kDone;
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

absl::Status Trainer::OnPeerLost(const PeerLostError& e) {
  spdlog::warn("lost a peer learner at step {}: {}", progress_.step, e.what());
  if (rank() == 0) {
    absl::Status saved = Checkpoint();
    if (saved.ok()) {
      spdlog::info(
          "checkpointed step {}, the last step all learners completed, for the gang's restart",
          progress_.step);
    } else {
      spdlog::warn("no checkpoint after losing a peer: {}", saved.message());
    }
  }
  return absl::UnavailableError(
      absl::StrCat("a peer learner of the gang is gone (", e.what(), ")"));
}

absl::StatusOr<LoopResult> Trainer::Finish() {
  {
    // Replicas must agree bit for bit; the sum of all parameters shows it in each rank's log.
    torch::NoGradGuard no_grad;
    double checksum = 0;
    for (const torch::Tensor& p : model_->parameters()) {
      checksum += p.to(torch::kFloat64).sum().item<double>();
    }
    spdlog::info("parameters checksum {:.10e} at step {}", checksum, progress_.step);
  }
  LoopResult result;
  if (rank() != 0) {
    result.reason = absl::StrFormat("rank %d of %d done at step %d; rank 0 writes the final model",
                                    rank(), world(), progress_.step);
  } else {
    result.reason = targets_.BudgetReason(spec_.training.epochs);
  }
  if (rank() == 0) RETURN_IF_ERROR(Export(kFinalModel, targets_.last()));
  result.succeeded = true;
  result.best_test_accuracy = targets_.best();
  result.final_test_accuracy = targets_.last();
  return result;
}

absl::StatusOr<std::optional<LoopResult>> Trainer::TrainToEnd(bool* complete) {
  if (eval_pending_) {
    // The gang lost a learner during this evaluation: do it now, before training on.
    epoch_in_progress_ = epoch_offset_ == 0 ? progress_.epoch : progress_.epoch + 1;
    spdlog::info("evaluating step {} first: its evaluation was interrupted", progress_.step);
    RETURN_IF_ERROR(EvaluateAndCheckTargets(complete));
    eval_pending_ = false;
  }
  for (int epoch = progress_.epoch; epoch < spec_.training.epochs && !*complete; ++epoch) {
    ASSIGN_OR_RETURN(EpochEnd end, TrainEpoch(epoch));
    if (end == EpochEnd::kStopped) {
      LoopResult result;
      result.stopped = true;
      result.reason = "stopped on request";
      result.best_test_accuracy = targets_.best();
      return result;
    }
    *complete = end == EpochEnd::kComplete;
  }
  return std::nullopt;
}

absl::StatusOr<LoopResult> Trainer::Run() {
  optimizer_ = MakeOptimizer();
  int64_t resumed_from = -1;
  if (o_.learner.generation > 1) {
    // Joining a running elastic job: its group's rank 0 hands over the training state.
    generation_ = o_.learner.generation;
    RETURN_IF_ERROR(TakeRank0State());
    spdlog::info("joined generation {} as rank {} of {} at step {} ({} samples into epoch {})",
                 generation_, rank(), world(), progress_.step, epoch_offset_, progress_.epoch + 1);
  } else {
    ASSIGN_OR_RETURN(resumed_from, ResumeFromCheckpoints());
    RETURN_IF_ERROR(SyncGang());
    RETURN_IF_ERROR(OpenAudit());
    Plan();
  }
  dp_->AttachGradientHooks(model_->parameters());
  model_->train();
  last_report_s_ = NowS();
  last_checkpoint_s_ = NowS();
  bool complete = false;
  for (;;) {
    absl::StatusOr<bool> member = true;
    try {
      ASSIGN_OR_RETURN(std::optional<LoopResult> stopped, TrainToEnd(&complete));
      if (stopped) {
        stopped->resumed_from_step = resumed_from;
        return *stopped;
      }
      break;
    } catch (const PeerLostError& e) {
      if (!spec_.resources.elastic) return OnPeerLost(e);
      member = Regroup(absl::StrCat("lost a peer learner (", e.what(), ")"));
      if (!member.ok()) {
        spdlog::warn("cannot regroup in place: {}", member.status().message());
        return OnPeerLost(e);
      }
    } catch (const RegroupRequest& e) {
      member = Regroup(e.what());
      if (!member.ok()) {
        spdlog::warn("cannot regroup in place: {}", member.status().message());
        return OnPeerLost(PeerLostError(e.what()));
      }
    }
    if (!*member) {
      LoopResult result;
      result.stopped = true;
      result.reason = "left the job's group at weftd's request";
      result.best_test_accuracy = targets_.best();
      result.resumed_from_step = resumed_from;
      return result;
    }
  }
  ASSIGN_OR_RETURN(LoopResult result, Finish());
  result.resumed_from_step = resumed_from;
  return result;
}

}  // namespace weft::train
