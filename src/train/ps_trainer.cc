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

constexpr double kReportIntervalS = 1.0;
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
    : o_(o),
      spec_(o.spec),
      env_(o.env ? *o.env : Env::Default()),
      reporter_(r),
      model_(std::move(model)),
      train_(std::move(train)),
      test_(std::move(test)),
      classes_(NumClasses(train_, test_)),
      order_(train_.size(), o.learner.world_size, o.learner.rank, spec_.training.batch_size,
             spec_.training.seed),
      timeout_ms_(o.rendezvous_timeout_ms),
      targets_(spec_.targets) {}

PsTrainer::~PsTrainer() = default;

bool PsTrainer::StopRequested() const { return train::StopRequested(o_, reporter_); }

absl::Status PsTrainer::Flatten() {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> parameters = model_->parameters();
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
  config.consistency = ConsistencyOf(spec_.training.ps.consistency);
  config.staleness = config.consistency == ps::Consistency::kSsp ? spec_.training.ps.staleness : 0;
  config.optimizer.kind =
      spec_.training.optimizer == "sgd" ? ps::OptimizerKind::kSgd : ps::OptimizerKind::kAdam;
  config.optimizer.learning_rate = spec_.ScaledLearningRate(world());
  config.optimizer.momentum = spec_.training.optimizer == "sgd" ? spec_.training.momentum : 0;
  config.optimizer.weight_decay = spec_.training.weight_decay;
  std::vector<float> fresh;
  if (state.shards.empty()) {  // the model as built from the seed
    fresh.assign(params_.data_ptr<float>(), params_.data_ptr<float>() + params_.numel());
  }
  RETURN_IF_ERROR(link_->StartServer(config, state, fresh));
  spdlog::info(
      "parameter server: {} parameters ({} bytes), {} slots, {} (staleness {}), {} learning rate "
      "{:g}, {}",
      config.num_params, config.num_params * 4, config.num_slots, spec_.training.ps.consistency,
      config.staleness, spec_.training.optimizer, config.optimizer.learning_rate,
      state.shards.empty() ? "fresh" : absl::StrCat("resumed at step ", step));
  return step;
}

absl::StatusOr<PsTrainer::End> PsTrainer::TrainShare(int64_t position) {
  const int64_t total = spec_.training.epochs * order_.BatchesPerEpoch();
  spdlog::info(
      "training positions {} to {} of this learner's share ({} samples, {} batches per "
      "epoch)",
      position, total, order_.SamplesInShare(), order_.BatchesPerEpoch());
  bool complete = false;
  while (position < total) {
    if (StopRequested()) return End::kStopped;
    absl::StatusOr<uint64_t> version = link_->Pull(params_.data_ptr<float>());
    if (absl::IsUnavailable(version.status())) return End::kClosed;
    if (!version.ok() && StopRequested()) return End::kStopped;
    RETURN_IF_ERROR(version.status());
    torch::Tensor idx = order_.Batch(position);
    torch::Tensor x = train_.Batch(idx);
    torch::Tensor y = train_.labels.index_select(0, idx);
    grads_.zero_();
    torch::Tensor loss = torch::nll_loss(model_->forward(x), y);
    loss.backward();
    // Returns once applied: the next gradient is computed on parameters that hold this one.
    absl::Status pushed = link_->Push(position, grads_.data_ptr<float>(), *version);
    if (absl::IsUnavailable(pushed)) return End::kClosed;
    if (!pushed.ok() && StopRequested()) return End::kStopped;
    RETURN_IF_ERROR(pushed);
    ++published_here_;
    ++position;
    if (leader_) {
      loss_sum_ += loss.item<double>();
      ++loss_steps_;
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
    totals.push_back(spec_.training.epochs * share.BatchesPerEpoch());
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
  int64_t epochs_done = spec_.training.epochs;
  for (int r = 0; r < world(); ++r) {
    step += positions[r];
    samples += shares_[r].SamplesBefore(positions[r]);
    const int64_t per_epoch = shares_[r].BatchesPerEpoch();
    total += spec_.training.epochs * per_epoch;
    if (per_epoch > 0) epochs_done = std::min(epochs_done, positions[r] / per_epoch);
  }
  progress_.step = step;
  progress_.samples = samples;
  progress_.steps_total = total;
  // Every report carries the counters, whichever sends the progress.
  progress_.parameter_server = stats;
  progress_.epochs_total = spec_.training.epochs;
  progress_.epoch = static_cast<int>(epochs_done);
  return absl::OkStatus();
}

absl::Status PsTrainer::LeadJob(bool* complete) {
  RETURN_IF_ERROR(UpdateProgress());
  const double now = NowS();
  if (now - last_report_s_ >= kReportIntervalS && loss_steps_ > 0) {
    MetricSample m;
    m.step = progress_.step;
    m.epoch = std::min(progress_.epoch + 1, spec_.training.epochs);
    m.wall_time_ms = SystemClock::Get().NowMs();
    m.train_loss = loss_sum_ / loss_steps_;
    m.samples_per_s = (progress_.samples - last_report_samples_) / (now - last_report_s_);
    reporter_.Report(m, progress_);
    loss_sum_ = 0;
    loss_steps_ = 0;
    last_report_samples_ = progress_.samples;
    last_report_s_ = now;
  }
  const int64_t every = spec_.training.eval_every_steps;
  if (progress_.epoch > evaluated_epochs_ ||
      (every > 0 && progress_.step >= evaluated_step_ + every)) {
    RETURN_IF_ERROR(EvaluateNow(complete));
    if (*complete) return absl::OkStatus();
  }
  const CheckpointSpec& c = spec_.checkpoint;
  // Every every_steps steps from the start (last_checkpoint_step_ is -1 before the first).
  const int64_t last = std::max<int64_t>(last_checkpoint_step_, 0);
  if ((c.every_steps > 0 && progress_.step >= last + c.every_steps) ||
      (c.every_seconds > 0 && now - last_checkpoint_s_ >= c.every_seconds)) {
    RETURN_IF_ERROR(Checkpoint());
  }
  return absl::OkStatus();
}

absl::Status PsTrainer::EvaluateNow(bool* complete) {
  // The parameters as the server holds them now (every epoch counted done is applied).
  ASSIGN_OR_RETURN(uint64_t version, link_->Pull(params_.data_ptr<float>()));
  Evaluation ev = Evaluate(model_, test_);
  evaluated_epochs_ = progress_.epoch;
  evaluated_step_ = progress_.step;
  const TargetTracker::Decision decision = targets_.Observe(ev.accuracy);
  const ps::ApplierStats& stats = *progress_.parameter_server;
  spdlog::info(
      "evaluation: epoch {} step {} version {} test_accuracy {:.4f} test_loss {:.4f}; server: {} "
      "gradients applied, {} discarded as non-finite, staleness histogram [{}] (0, 1, 2, 3-4, "
      "5-8, 9-16, 17-32, 33+)",
      progress_.epoch, progress_.step, version, ev.accuracy, ev.loss, stats.gradients_applied,
      stats.discarded_non_finite, absl::StrJoin(stats.staleness, ", "));
  MetricSample m;
  m.step = progress_.step;
  m.epoch = std::max(progress_.epoch, 1);
  m.wall_time_ms = SystemClock::Get().NowMs();
  m.test_accuracy = ev.accuracy;
  m.test_loss = ev.loss;
  reporter_.Report(m, progress_);
  if (decision.deliver) {
    spdlog::info("deliver target met: test_accuracy {:.4f} >= {}", ev.accuracy,
                 *spec_.targets.deliver);
    RETURN_IF_ERROR(
        ExportModel({o_, env_, reporter_, *model_, train_.SampleShape(), classes_, kDeliveredModel,
                     ev.accuracy, targets_.best(), progress_.epoch, progress_.step}));
    targets_.MarkDelivered();
  }
  if (decision.complete) *complete = true;
  return absl::OkStatus();
}

absl::StatusOr<PsTrainer::End> PsTrainer::AwaitOthers(bool* complete) {
  for (;;) {
    RETURN_IF_ERROR(LeadJob(complete));
    if (*complete) return End::kComplete;
    const std::vector<int64_t> totals = Totals();
    bool done = true;
    for (int r = 0; r < world(); ++r) done = done && positions_[r] >= totals[r];
    if (done && evaluated_epochs_ >= spec_.training.epochs) return End::kDone;
    if (StopRequested()) return End::kStopped;
    std::this_thread::sleep_for(std::chrono::milliseconds(kAwaitPollMs));
  }
}

absl::StatusOr<LoopResult> PsTrainer::FinishLeader(End end) {
  LoopResult result;
  result.best_test_accuracy = targets_.best();
  if (absl::Status s = UpdateProgress(); !s.ok()) spdlog::warn("{}", s.message());
  const ps::ApplierStats stats = progress_.parameter_server.value_or(ps::ApplierStats{});
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
  result.reason = targets_.BudgetReason(spec_.training.epochs);
  RETURN_IF_ERROR(
      ExportModel({o_, env_, reporter_, *model_, train_.SampleShape(), classes_, kFinalModel,
                   targets_.last(), targets_.best(), progress_.epoch, progress_.step}));
  result.succeeded = true;
  result.final_test_accuracy = targets_.last();
  return result;
}

absl::StatusOr<LoopResult> PsTrainer::Run() {
  RETURN_IF_ERROR(Flatten());
  const int servers = spec_.ParameterServers();
  if (static_cast<int>(o_.learner.ps_servers.size()) != servers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "training.ps.servers asks for ", std::max(servers, 1), " servers; WEFT_PS_SERVERS names ",
        o_.learner.ps_servers.size(), " (a weftd older than the job's spec?)"));
  }
  if (servers == 0) {
    ASSIGN_OR_RETURN(link_, SharedMemoryLink(o_.learner, timeout_ms_));
  } else {
    ASSIGN_OR_RETURN(link_, RemoteLink(o_.learner, params_.numel(), timeout_ms_));
  }
  model_->train();
  int64_t resumed_from = -1;
  leader_ = rank() == 0;
  if (leader_) {
    for (int r = 0; r < world(); ++r) {
      shares_.emplace_back(train_.size(), world(), r, spec_.training.batch_size,
                           spec_.training.seed);
    }
    ASSIGN_OR_RETURN(resumed_from, StartServer());
    last_report_s_ = last_checkpoint_s_ = NowS();
  }
  ASSIGN_OR_RETURN(int64_t position, link_->Attach([this] { return StopRequested(); }));
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
