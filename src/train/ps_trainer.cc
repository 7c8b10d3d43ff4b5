// The learner of a parameter-server job: data order, the flat parameter and gradient storage,
// the training loop every rank runs, and rank 0's server and leadership. Checkpoints of the
// server's state are in ps_checkpoint.cc.
#include "train/ps_trainer.h"

#include <ATen/CPUGeneratorImpl.h>

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "job/layout.h"

namespace weft::train {
namespace {

constexpr int64_t kAwaitPollMs = 20;

double NowS() { return SystemClock::Get().NowMs() / 1000.0; }

ps::Consistency ConsistencyOf(const std::string& name) {
  if (name == "bsp") return ps::Consistency::kBsp;
  if (name == "ssp") return ps::Consistency::kSsp;
  return ps::Consistency::kAsp;
}

}  // namespace

PsDataOrder::PsDataOrder(int64_t samples, int world, int rank, int64_t batch_size, uint64_t seed)
    : samples_(samples), world_(world), rank_(rank), batch_size_(batch_size), seed_(seed) {
  share_ = rank < samples ? (samples - rank + world - 1) / world : 0;
  batches_ = (share_ + batch_size - 1) / batch_size;
}

torch::Tensor PsDataOrder::Batch(int64_t position) {
  const int64_t epoch = position / batches_;
  const int64_t k = position % batches_;
  if (epoch != cached_epoch_) {
    // The permutation an allreduce gang draws for the epoch (trainer.cc), dealt round-robin.
    auto gen = at::detail::createCPUGenerator(seed_ * 1000003 + epoch);
    torch::Tensor perm =
        torch::randperm(samples_, gen, torch::TensorOptions().dtype(torch::kInt64));
    cached_share_ = perm.slice(0, rank_, samples_, world_).contiguous();
    cached_epoch_ = epoch;
  }
  return cached_share_.slice(0, k * batch_size_, std::min(share_, (k + 1) * batch_size_));
}

int64_t PsDataOrder::SamplesBefore(int64_t position) const {
  if (batches_ == 0) return 0;
  return position / batches_ * share_ + std::min(share_, position % batches_ * batch_size_);
}

PsTrainer::PsTrainer(const LoopOptions& o, Reporter& r, Model model, Dataset train, Dataset test)
    : run_(o, r, std::move(model), std::move(train), std::move(test)),
      order_(run_.train().size(), o.learner.world_size, o.learner.rank, o.spec.training.batch_size,
             o.spec.training.seed),
      timeout_ms_(o.rendezvous_timeout_ms) {}

PsTrainer::~PsTrainer() = default;

absl::Status PsTrainer::Flatten() {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> parameters = run_.model()->parameters();
  int64_t n = 0;
  for (const torch::Tensor& p : parameters) {
    if (p.scalar_type() != torch::kFloat32) {
      return absl::InvalidArgumentError(
          absl::StrCat("training.sync: ps needs float32 parameters; the model has one of ",
                       c10::toString(p.scalar_type())));
    }
    n += p.numel();
  }
  params_ = torch::empty({n}, torch::kFloat32);
  grads_ = torch::zeros({n}, torch::kFloat32);
  int64_t offset = 0;
  for (torch::Tensor& p : parameters) {
    const int64_t k = p.numel();
    torch::Tensor view = params_.narrow(0, offset, k);
    view.copy_(p.reshape({-1}));
    // Pulls write the parameters in place, and backward accumulates into these gradients (as
    // DDP's gradient_as_bucket_view): no copy either way.
    p.set_data(view.view(p.sizes()));
    p.mutable_grad() = grads_.narrow(0, offset, k).view(p.sizes());
    offset += k;
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> PsTrainer::StartServer() {
  int64_t step = -1;
  ps::ShardedState state = ResumeState(&step);
  ps::ServerConfig config;
  config.num_slots = world();
  config.num_params = params_.numel();
  config.consistency = ConsistencyOf(run_.spec().training.ps.consistency);
  config.staleness =
      config.consistency == ps::Consistency::kSsp ? run_.spec().training.ps.staleness : 0;
  config.optimizer.kind =
      run_.spec().training.optimizer == "sgd" ? ps::OptimizerKind::kSgd : ps::OptimizerKind::kAdam;
  config.optimizer.learning_rate = run_.spec().ScaledLearningRate(world());
  config.optimizer.momentum =
      run_.spec().training.optimizer == "sgd" ? run_.spec().training.momentum : 0;
  config.optimizer.weight_decay = run_.spec().training.weight_decay;
  std::vector<float> fresh;
  if (state.shards.empty()) {  // the model as built from the seed
    fresh.assign(params_.data_ptr<float>(), params_.data_ptr<float>() + params_.numel());
  }
  RETURN_IF_ERROR(link_->StartServer(config, state, fresh));
  spdlog::info(
      "parameter server: {} parameters ({} bytes), {} slots, {} (staleness {}), {} learning rate "
      "{:g}, {}",
      config.num_params, config.num_params * 4, config.num_slots,
      run_.spec().training.ps.consistency, config.staleness, run_.spec().training.optimizer,
      config.optimizer.learning_rate,
      state.shards.empty() ? "fresh" : absl::StrCat("resumed at step ", step));
  return step;
}

absl::StatusOr<PsTrainer::End> PsTrainer::TrainShare(int64_t position) {
  const int64_t total = run_.spec().training.epochs * order_.BatchesPerEpoch();
  spdlog::info(
      "training positions {} to {} of this learner's share ({} samples, {} batches per "
      "epoch)",
      position, total, order_.SamplesInShare(), order_.BatchesPerEpoch());
  bool complete = false;
  while (position < total) {
    if (run_.StopRequested()) return End::kStopped;
    absl::StatusOr<uint64_t> version = link_->Pull(params_.data_ptr<float>());
    if (absl::IsUnavailable(version.status())) return End::kClosed;
    if (!version.ok() && run_.StopRequested()) return End::kStopped;
    RETURN_IF_ERROR(version.status());
    torch::Tensor idx = order_.Batch(position);
    torch::Tensor x = run_.train().Batch(idx);
    torch::Tensor y = run_.train().labels.index_select(0, idx);
    grads_.zero_();
    torch::Tensor loss = torch::nll_loss(run_.model()->forward(x), y);
    loss.backward();
    // Returns once applied: the next gradient is computed on parameters that hold this one.
    absl::Status pushed = link_->Push(position, grads_.data_ptr<float>(), *version);
    if (absl::IsUnavailable(pushed)) return End::kClosed;
    if (!pushed.ok() && run_.StopRequested()) return End::kStopped;
    RETURN_IF_ERROR(pushed);
    ++published_here_;
    ++position;
    if (leader_) {
      run_.AddLoss(loss.item<double>());
      RETURN_IF_ERROR(LeadJob(&complete));
      if (complete) return End::kComplete;
    }
  }
  // Rank 0 keeps pulling (evaluations, the final model): its slot must not hold up the others'
  // bsp rounds or the ssp bound while they finish their shares.
  link_->Done();
  return End::kDone;
}

std::vector<int64_t> PsTrainer::Totals() const {
  std::vector<int64_t> totals;
  for (const PsDataOrder& share : shares_) {
    totals.push_back(run_.spec().training.epochs * share.BatchesPerEpoch());
  }
  return totals;
}

absl::Status PsTrainer::UpdateProgress() {
  ps::ApplierStats stats;
  ASSIGN_OR_RETURN(positions_, link_->Positions(&stats));
  if (static_cast<int>(positions_.size()) != world()) {
    return absl::InternalError(absl::StrCat("the parameter server reports ", positions_.size(),
                                            " learners; the job has ", world()));
  }
  const std::vector<int64_t>& positions = positions_;
  int64_t step = 0, samples = 0, total = 0;
  int64_t epochs_done = run_.spec().training.epochs;
  for (int r = 0; r < world(); ++r) {
    step += positions[r];
    samples += shares_[r].SamplesBefore(positions[r]);
    const int64_t per_epoch = shares_[r].BatchesPerEpoch();
    total += run_.spec().training.epochs * per_epoch;
    if (per_epoch > 0) epochs_done = std::min(epochs_done, positions[r] / per_epoch);
  }
  run_.progress().step = step;
  run_.progress().samples = samples;
  run_.progress().steps_total = total;
  // Every report carries the counters, whichever sends the progress.
  run_.progress().parameter_server = stats;
  run_.progress().epochs_total = run_.spec().training.epochs;
  run_.progress().epoch = static_cast<int>(epochs_done);
  return absl::OkStatus();
}

absl::Status PsTrainer::LeadJob(bool* complete) {
  RETURN_IF_ERROR(UpdateProgress());
  const double now = NowS();
  if (run_.ReportDue(now)) {
    const double samples_per_s =
        (run_.progress().samples - last_report_samples_) / (now - run_.last_report_s());
    run_.ReportLoss(std::min(run_.progress().epoch + 1, run_.spec().training.epochs), samples_per_s,
                    /*world_size=*/0, now);
    last_report_samples_ = run_.progress().samples;
  }
  const int64_t every = run_.spec().training.eval_every_steps;
  if (run_.progress().epoch > evaluated_epochs_ ||
      (every > 0 && run_.progress().step >= evaluated_step_ + every)) {
    RETURN_IF_ERROR(EvaluateNow(complete));
    if (*complete) return absl::OkStatus();
  }
  const CheckpointSpec& c = run_.spec().checkpoint;
  // Every every_steps steps from the start (the last checkpoint's step is -1 before the first).
  const int64_t last = std::max<int64_t>(run_.last_checkpoint_step(), 0);
  if ((c.every_steps > 0 && run_.progress().step >= last + c.every_steps) ||
      (c.every_seconds > 0 && now - run_.last_checkpoint_s() >= c.every_seconds)) {
    RETURN_IF_ERROR(Checkpoint());
  }
  return absl::OkStatus();
}

absl::Status PsTrainer::EvaluateNow(bool* complete) {
  // The parameters as the server holds them now (every epoch counted done is applied).
  ASSIGN_OR_RETURN(uint64_t version, link_->Pull(params_.data_ptr<float>()));
  ASSIGN_OR_RETURN(const Evaluation ev, Evaluate(run_.model(), run_.test()));
  evaluated_epochs_ = run_.progress().epoch;
  evaluated_step_ = run_.progress().step;
  const ps::ApplierStats& stats = *run_.progress().parameter_server;
  spdlog::info(
      "evaluation: epoch {} step {} version {} test_accuracy {:.4f} test_loss {:.4f}; server: {} "
      "gradients applied, {} discarded as non-finite, staleness histogram [{}] (0, 1, 2, 3-4, "
      "5-8, 9-16, 17-32, 33+)",
      run_.progress().epoch, run_.progress().step, version, ev.accuracy, ev.loss,
      stats.gradients_applied, stats.discarded_non_finite, absl::StrJoin(stats.staleness, ", "));
  ASSIGN_OR_RETURN(const bool met,
                   run_.ActOnEvaluation(ev, std::max(run_.progress().epoch, 1), /*leads=*/true));
  if (met) *complete = true;
  return absl::OkStatus();
}

absl::StatusOr<PsTrainer::End> PsTrainer::AwaitOthers(bool* complete) {
  for (;;) {
    RETURN_IF_ERROR(LeadJob(complete));
    if (*complete) return End::kComplete;
    const std::vector<int64_t> totals = Totals();
    bool done = true;
    for (int r = 0; r < world(); ++r) done = done && positions_[r] >= totals[r];
    if (done && evaluated_epochs_ >= run_.spec().training.epochs) return End::kDone;
    if (run_.StopRequested()) return End::kStopped;
    std::this_thread::sleep_for(std::chrono::milliseconds(kAwaitPollMs));
  }
}

absl::StatusOr<LoopResult> PsTrainer::FinishLeader(End end) {
  LoopResult result;
  result.best_test_accuracy = run_.targets().best();
  if (absl::Status s = UpdateProgress(); !s.ok()) spdlog::warn("{}", s.message());
  const ps::ApplierStats stats = run_.progress().parameter_server.value_or(ps::ApplierStats{});
  spdlog::info(
      "parameter server: version {}, {} gradients applied, {} discarded as non-finite; slot "
      "positions [{}] of [{}]; this learner published {} gradients; {}",
      stats.version, stats.gradients_applied, stats.discarded_non_finite,
      absl::StrJoin(positions_, ", "), absl::StrJoin(Totals(), ", "), published_here_,
      link_->SlotSummary());
  if (end == End::kStopped) {
    // Keep what was applied: halt and preemption resume from here.
    if (absl::Status saved = Checkpoint(); !saved.ok()) {
      spdlog::warn("no checkpoint on stop: {}", saved.message());
    }
    result.stopped = true;
    result.reason = "stopped on request";
    return result;
  }
  // The final model is the server's parameters as they are now.
  RETURN_IF_ERROR(link_->Pull(params_.data_ptr<float>()).status());
  result.reason = run_.targets().BudgetReason(run_.spec().training.epochs);
  if (run_.spec().checkpoint.at_end) RETURN_IF_ERROR(Checkpoint());
  RETURN_IF_ERROR(run_.Export(kFinalModel, run_.targets().last()));
  result.succeeded = true;
  result.final_test_accuracy = run_.targets().last();
  return result;
}

absl::StatusOr<LoopResult> PsTrainer::Run() {
  RETURN_IF_ERROR(Flatten());
  const int servers = run_.spec().ParameterServers();
  if (static_cast<int>(run_.options().learner.ps_servers.size()) != servers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "training.ps.servers asks for ", std::max(servers, 1), " servers; WEFT_PS_SERVERS names ",
        run_.options().learner.ps_servers.size(), " (a weftd older than the job's spec?)"));
  }
  if (servers == 0) {
    ASSIGN_OR_RETURN(link_, SharedMemoryLink(run_.options().learner, timeout_ms_));
  } else {
    ASSIGN_OR_RETURN(link_, RemoteLink(run_.options().learner, params_.numel(), timeout_ms_));
  }
  run_.model()->train();
  int64_t resumed_from = -1;
  leader_ = rank() == 0;
  if (leader_) {
    for (int r = 0; r < world(); ++r) {
      shares_.emplace_back(run_.train().size(), world(), r, run_.spec().training.batch_size,
                           run_.spec().training.seed);
    }
    ASSIGN_OR_RETURN(resumed_from, StartServer());
    run_.StartClocks();
  }
  ASSIGN_OR_RETURN(int64_t position, link_->Attach([this] { return run_.StopRequested(); }));
  End end = End::kClosed;
  bool complete = false;
  if (position >= 0) {
    ASSIGN_OR_RETURN(end, TrainShare(position));
    if (end == End::kDone && leader_) {
      ASSIGN_OR_RETURN(end, AwaitOthers(&complete));
    }
    complete = complete || end == End::kComplete;
  }
  if (leader_) {
    absl::StatusOr<LoopResult> result = FinishLeader(end);
    link_->Close();  // the others' next call says so, and they exit
    if (result.ok()) result->resumed_from_step = resumed_from;
    return result;
  }
  spdlog::info("learner {}: this process published {} gradients; {}", rank(), published_here_,
               link_->SlotSummary());
  LoopResult result;
  if (end == End::kStopped) {
    result.stopped = true;
    result.reason = "stopped on request";
    return result;
  }
  result.succeeded = true;
  result.reason = end == End::kClosed
                      ? absl::StrCat("rank ", rank(), " of ", world(),
                                     ": the parameter server closed (rank 0 ended the job)")
                      : absl::StrCat("rank ", rank(), " of ", world(),
                                     " done: its share is applied; rank 0 writes the final model");
  return result;
}

}  // namespace weft::train
