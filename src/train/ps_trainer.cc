// The learner of a parameter-server job: data order, the flat parameter and gradient storage,
// the training loop every rank runs, and rank 0's server and leadership. Checkpoints of the
// server's state are in ps_checkpoint.cc.
#include "train/ps_trainer.h"

#include <ATen/CPUGeneratorImpl.h>

#include <chrono>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "job/layout.h"
#include "ps/segment.h"

namespace weft::train {
namespace {

constexpr double kReportIntervalS = 1.0;
constexpr int64_t kAttachPollMs = 50;
constexpr int64_t kAwaitPollMs = 20;
// Earlier attempts whose segments rank 0 removes if their rank 0 died before it could.
constexpr int64_t kStaleAttempts = 64;

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
      timeout_ms_(o.rendezvous_timeout_ms) {}

PsTrainer::~PsTrainer() { StopApplier(); }

bool PsTrainer::StopRequested() const { return train::StopRequested(o_, reporter_); }

void PsTrainer::StopApplier() {
  applier_stop_.store(true);
  if (applier_.joinable()) applier_.join();
}

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
  for (int64_t a = std::max<int64_t>(1, o_.learner.attempt - kStaleAttempts);
       a < o_.learner.attempt; ++a) {
    if (auto stale = ps::SegmentNameForJob(o_.learner.job_id, a); stale.ok()) {
      if (ps::SharedSegment::Unlink(*stale).ok()) spdlog::info("removed stale segment {}", *stale);
    }
  }
  int64_t step = -1;
  ASSIGN_OR_RETURN(ps::ServerState state, ResumeState(&step));
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
  ASSIGN_OR_RETURN(server_, ps::SharedParameterServer::Create(segment_name_, config, state));
  applier_ = std::thread([this] { server_->Run(applier_stop_); });
  spdlog::info(
      "parameter server {}: {} parameters ({} bytes), {} slots, {} (staleness {}), {} learning "
      "rate {:g}, applier thread started; version {}, slot positions [{}]",
      segment_name_, config.num_params, config.num_params * 4, config.num_slots,
      spec_.training.ps.consistency, config.staleness, spec_.training.optimizer,
      config.optimizer.learning_rate, state.version, absl::StrJoin(server_->Positions(), ", "));
  return step;
}

absl::StatusOr<bool> PsTrainer::Attach() {
  const int64_t deadline = SystemClock::Get().NowMs() + timeout_ms_;
  for (;;) {
    absl::StatusOr<std::unique_ptr<ps::SharedPsClient>> client =
        ps::SharedPsClient::Attach(segment_name_, rank());
    if (client.ok()) {
      client_ = std::move(*client);
      return true;
    }
    if (absl::IsFailedPrecondition(client.status()) &&
        absl::StrContains(client.status().message(), "closed")) {
      return false;
    }
    if (!absl::IsNotFound(client.status()) && !absl::IsUnavailable(client.status())) {
      return client.status();
    }
    if (SystemClock::Get().NowMs() > deadline || StopRequested()) {
      return absl::UnavailableError(absl::StrCat("rank 0 created no parameter server ",
                                                 segment_name_, " within ", timeout_ms_, " ms"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(kAttachPollMs));
  }
}

absl::StatusOr<PsTrainer::End> PsTrainer::TrainShare() {
  const int64_t total = spec_.training.epochs * order_.BatchesPerEpoch();
  // A replacement goes on after its predecessor's last published batch (that one is applied).
  int64_t position = client_->start_position() + static_cast<int64_t>(client_->published());
  spdlog::info(
      "training positions {} to {} of this learner's share ({} samples, {} batches per "
      "epoch)",
      position, total, order_.SamplesInShare(), order_.BatchesPerEpoch());
  bool complete = false;
  while (position < total) {
    if (StopRequested()) return End::kStopped;
    absl::StatusOr<uint64_t> version = client_->Pull(params_.data_ptr<float>(), timeout_ms_);
    if (absl::IsUnavailable(version.status())) return End::kClosed;
    RETURN_IF_ERROR(version.status());
    torch::Tensor idx = order_.Batch(position);
    torch::Tensor x = train_.samples.index_select(0, idx);
    torch::Tensor y = train_.labels.index_select(0, idx);
    grads_.zero_();
    torch::Tensor loss = torch::nll_loss(model_->forward(x), y);
    loss.backward();
    absl::StatusOr<uint64_t> seq =
        client_->Publish(grads_.data_ptr<float>(), *version, timeout_ms_);
    if (absl::IsUnavailable(seq.status())) return End::kClosed;
    RETURN_IF_ERROR(seq.status());
    last_seq_ = *seq;
    ++published_here_;
    ++position;
    // Acknowledged: the next gradient is computed on parameters that hold this one (under bsp,
    // this round's version, as after an allreduce step). Without the wait it would be computed
    // without it, one version staler; the applier takes tens of microseconds.
    absl::Status applied = client_->WaitApplied(*seq, timeout_ms_);
    if (absl::IsUnavailable(applied)) return End::kClosed;
    RETURN_IF_ERROR(applied);
    if (server_) {
      loss_sum_ += loss.item<double>();
      ++loss_steps_;
      RETURN_IF_ERROR(LeadJob(&complete));
      if (complete) return End::kComplete;
    }
  }
  // Rank 0 keeps pulling (evaluations, the final model): its slot must not hold up the others'
  // bsp rounds or the ssp bound while they finish their shares.
  client_->Done();
  return End::kDone;
}

std::vector<int64_t> PsTrainer::Totals() const {
  std::vector<int64_t> totals;
  for (const PsDataOrder& share : shares_) {
    totals.push_back(spec_.training.epochs * share.BatchesPerEpoch());
  }
  return totals;
}

void PsTrainer::UpdateProgress() {
  const std::vector<int64_t> positions = server_->Positions();
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
  // A dozen atomic loads: every report carries the counters, whichever sends the progress.
  progress_.parameter_server = server_->Stats();
  progress_.epochs_total = spec_.training.epochs;
  progress_.epoch = static_cast<int>(epochs_done);
}

absl::Status PsTrainer::LeadJob(bool* complete) {
  UpdateProgress();
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
  if ((c.every_steps > 0 && progress_.step >= last_checkpoint_step_ + c.every_steps) ||
      (c.every_seconds > 0 && now - last_checkpoint_s_ >= c.every_seconds)) {
    RETURN_IF_ERROR(Checkpoint());
  }
  return absl::OkStatus();
}

absl::Status PsTrainer::EvaluateNow(bool* complete) {
  // The parameters as the server holds them now (every epoch counted done is applied).
  ASSIGN_OR_RETURN(uint64_t version, client_->Pull(params_.data_ptr<float>(), timeout_ms_));
  Evaluation ev = Evaluate(model_, test_);
  evaluated_epochs_ = progress_.epoch;
  evaluated_step_ = progress_.step;
  last_accuracy_ = ev.accuracy;
  best_ = std::max(best_, ev.accuracy);
  const ps::ApplierStats stats = server_->Stats();
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
  const TargetSpec& t = spec_.targets;
  if (t.deliver && !delivered_ && ev.accuracy >= *t.deliver) {
    spdlog::info("deliver target met: test_accuracy {:.4f} >= {}", ev.accuracy, *t.deliver);
    RETURN_IF_ERROR(
        ExportModel({o_, env_, reporter_, *model_, train_.SampleShape(), classes_, kDeliveredModel,
                     ev.accuracy, best_, progress_.epoch, progress_.step}));
    delivered_ = true;
  }
  if (t.complete && ev.accuracy >= *t.complete) {
    complete_met_ = ev.accuracy;
    *complete = true;
  }
  return absl::OkStatus();
}

absl::StatusOr<PsTrainer::End> PsTrainer::AwaitOthers(bool* complete) {
  for (;;) {
    RETURN_IF_ERROR(LeadJob(complete));
    if (*complete) return End::kComplete;
    const std::vector<int64_t> positions = server_->Positions();
    const std::vector<int64_t> totals = Totals();
    bool done = true;
    for (int r = 0; r < world(); ++r) done = done && positions[r] >= totals[r];
    if (done && evaluated_epochs_ >= spec_.training.epochs) return End::kDone;
    if (StopRequested()) return End::kStopped;
    std::this_thread::sleep_for(std::chrono::milliseconds(kAwaitPollMs));
  }
}

absl::StatusOr<LoopResult> PsTrainer::FinishLeader(End end, bool complete) {
  LoopResult result;
  result.best_test_accuracy = best_;
  const ps::ApplierStats stats = server_->Stats();
  UpdateProgress();
  spdlog::info(
      "parameter server: version {}, {} gradients applied, {} discarded as non-finite; slot "
      "positions [{}] of [{}]; this learner published {} gradients",
      stats.version, stats.gradients_applied, stats.discarded_non_finite,
      absl::StrJoin(server_->Positions(), ", "), absl::StrJoin(Totals(), ", "), published_here_);
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
  RETURN_IF_ERROR(client_->Pull(params_.data_ptr<float>(), timeout_ms_).status());
  result.reason = FinishReason(spec_, complete, complete_met_, best_, last_accuracy_);
  RETURN_IF_ERROR(
      ExportModel({o_, env_, reporter_, *model_, train_.SampleShape(), classes_, kFinalModel,
                   last_accuracy_, best_, progress_.epoch, progress_.step}));
  result.succeeded = true;
  result.final_test_accuracy = last_accuracy_;
  return result;
}

absl::StatusOr<LoopResult> PsTrainer::Run() {
  ASSIGN_OR_RETURN(segment_name_, ps::SegmentNameForJob(o_.learner.job_id, o_.learner.attempt));
  RETURN_IF_ERROR(Flatten());
  model_->train();
  int64_t resumed_from = -1;
  if (rank() == 0) {
    for (int r = 0; r < world(); ++r) {
      shares_.emplace_back(train_.size(), world(), r, spec_.training.batch_size,
                           spec_.training.seed);
    }
    ASSIGN_OR_RETURN(resumed_from, StartServer());
    last_report_s_ = last_checkpoint_s_ = NowS();
  }
  ASSIGN_OR_RETURN(bool attached, Attach());
  End end = End::kClosed;
  bool complete = false;
  if (attached) {
    ASSIGN_OR_RETURN(end, TrainShare());
    if (end == End::kDone && server_) {
      ASSIGN_OR_RETURN(end, AwaitOthers(&complete));
    }
    complete = complete || end == End::kComplete;
  }
  if (server_) {
    ASSIGN_OR_RETURN(LoopResult result, FinishLeader(end, complete));
    result.resumed_from_step = resumed_from;
    StopApplier();
    server_.reset();  // closed: the others' next call says so, and they exit
    return result;
  }
  spdlog::info(
      "slot {}: this process published {} gradients; the slot's gradients applied: {} "
      "(start position {})",
      rank(), published_here_, client_ ? client_->applied() : 0,
      client_ ? client_->start_position() : 0);
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
