#include "train/training_loop.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/clock.h"
#include "common/failpoint.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "common/logging.h"
#include "job/layout.h"
#include "train/data_parallel.h"
#include "train/dataset.h"
#include "train/models.h"

namespace weft::train {
namespace {

using Model = std::shared_ptr<ClassifierImpl>;
constexpr double kReportIntervalS = 1.0;
constexpr int64_t kEvalBatch = 1000;

double NowS() { return SystemClock::Get().NowMs() / 1000.0; }

// libtorch's message without its C++ backtrace.
std::string TorchMessage(const std::exception& e) {
  if (const auto* c10 = dynamic_cast<const c10::Error*>(&e)) return c10->what_without_backtrace();
  return e.what();
}

struct Evaluation {
  double accuracy = 0;
  double loss = 0;
};

// Accuracy and mean loss over the test split. With `dp` spanning several ranks each evaluates
// its contiguous 1/world_size of the split and the counts are summed, so every rank gets the
// same figures (and takes the same decisions on targets).
Evaluation Evaluate(const Model& model, const Dataset& test, DataParallel* dp = nullptr) {
  torch::NoGradGuard no_grad;
  model->eval();
  int64_t correct = 0;
  double loss = 0;
  const int world = dp ? dp->world_size() : 1;
  const int rank = dp ? dp->rank() : 0;
  const int64_t begin = test.size() * rank / world;
  const int64_t stop = test.size() * (rank + 1) / world;
  for (int64_t i = begin; i < stop; i += kEvalBatch) {
    int64_t end = std::min(stop, i + kEvalBatch);
    torch::Tensor out = model->forward(test.images.slice(0, i, end));
    torch::Tensor y = test.labels.slice(0, i, end);
    loss += torch::nll_loss(out, y, {}, torch::Reduction::Sum).item<double>();
    correct += out.argmax(1).eq(y).sum().item<int64_t>();
  }
  model->train();
  if (dp) {
    Failpoint("evaluation-before-allreduce");
    std::vector<double> sums = dp->Sum({static_cast<double>(correct), loss});
    correct = static_cast<int64_t>(std::llround(sums[0]));
    loss = sums[1];
  }
  return {static_cast<double>(correct) / test.size(), loss / test.size()};
}

class Trainer {
 public:
  Trainer(const LoopOptions& o, Reporter& r, Model model, Dataset train, Dataset test,
          std::unique_ptr<DataParallel> dp)
      : o_(o), spec_(o.spec), reporter_(r), model_(std::move(model)),
        train_(std::move(train)), test_(std::move(test)), dp_(std::move(dp)) {}

  absl::StatusOr<LoopResult> Run();

 private:
  std::unique_ptr<torch::optim::Optimizer> MakeOptimizer();
  // Writes a checkpoint of the whole training state and commits it (rank 0 only).
  absl::Status Checkpoint();
  bool CheckpointDue() const;
  // Loads the training state from `path`. DataLoss if the file is truncated or corrupt.
  absl::Status Restore(const std::string& path);
  bool StopRequested() const {
    return (o_.stop_requested && o_.stop_requested->load()) || !reporter_.KeepRunning();
  }
  void ReportTraining(bool force);
  // Evaluates, reports, and acts on the targets. Sets *complete when the complete target is met.
  absl::Status EvaluateAndCheckTargets(bool* complete);
  absl::Status Export(const std::string& kind, double accuracy);
  // Another learner of the gang is gone mid-collective. This rank's state is that of the last
  // step every rank completed (a failed step is not applied), so rank 0 checkpoints it before
  // exiting and the gang's restart loses (almost) no steps. Returns Unavailable.
  absl::Status OnPeerLost(const PeerLostError& e);

  const LoopOptions& o_;
  const JobSpec& spec_;
  Reporter& reporter_;
  Model model_;
  Dataset train_, test_;
  std::unique_ptr<DataParallel> dp_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;

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
  int64_t step_in_epoch_ = 0;          // steps done in the epoch in progress
  int64_t last_checkpoint_step_ = -1;
  int64_t step_in_epoch_at_start_ = 0;  // where this epoch's loop began (after a resume: > 0)
  double epoch_train_seconds_ = 0;      // this epoch's time in training steps
  double last_checkpoint_s_ = 0;
  // An evaluation was due at progress_.step and has not finished: set while it runs, so a
  // checkpoint written when a peer is lost mid-evaluation makes the restart evaluate first.
  bool eval_pending_ = false;
  bool last_checkpoint_eval_pending_ = false;
};

constexpr char kCheckpointFormat[] = "weft-checkpoint-v1";

absl::Status Trainer::Checkpoint() {
  if (o_.rank != 0 || o_.checkpoint_dir.empty() ||
      (progress_.step == last_checkpoint_step_ && eval_pending_ == last_checkpoint_eval_pending_)) {
    return absl::OkStatus();  // this state is on disk already
  }
  auto t0 = std::chrono::steady_clock::now();
  std::ostringstream bytes;
  try {
    torch::serialize::OutputArchive ar;
    torch::serialize::OutputArchive model_ar, opt_ar;
    model_->save(model_ar);
    optimizer_->save(opt_ar);
    ar.write("model", model_ar);
    ar.write("optimizer", opt_ar);
    auto i64 = [](int64_t v) { return torch::tensor(v, torch::kInt64); };
    ar.write("format", i64(1));
    ar.write("epoch", i64(progress_.epoch));
    ar.write("step", i64(progress_.step));
    ar.write("samples", i64(progress_.samples));
    ar.write("step_in_epoch", i64(step_in_epoch_));
    ar.write("delivered", i64(delivered_ ? 1 : 0));
    ar.write("eval_pending", i64(eval_pending_ ? 1 : 0));
    ar.write("best", torch::tensor(best_, torch::kFloat64));
    ar.write("last_accuracy", torch::tensor(last_accuracy_, torch::kFloat64));
    ar.write("rng", at::detail::getDefaultCPUGenerator().get_state());
    ar.save_to(bytes);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("cannot serialise a checkpoint: ", TorchMessage(e)));
  }
  RETURN_IF_ERROR(MakeDirs(o_.checkpoint_dir));
  std::string path = CheckpointPath(o_.checkpoint_dir, progress_.step);
  RETURN_IF_ERROR(WriteFileAtomic(path, bytes.str()));
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info("checkpoint written: {} (step {}, {} bytes, {:.0f} ms)", path, progress_.step,
               bytes.str().size(), ms);
  Failpoint("checkpoint-before-commit");
  RETURN_IF_ERROR(reporter_.CommitCheckpoint(path, progress_.epoch, progress_.step,
                                             static_cast<int64_t>(bytes.str().size())));
  last_checkpoint_step_ = progress_.step;
  last_checkpoint_eval_pending_ = eval_pending_;
  last_checkpoint_s_ = NowS();
  return absl::OkStatus();
}

bool Trainer::CheckpointDue() const {
  const CheckpointSpec& c = spec_.checkpoint;
  if (c.every_steps > 0 && progress_.step % c.every_steps == 0) return true;
  return c.every_seconds > 0 && NowS() - last_checkpoint_s_ >= c.every_seconds;
}

absl::Status Trainer::Restore(const std::string& path) {
  torch::serialize::InputArchive ar;
  try {
    ar.load_from(path);
  } catch (const std::exception& e) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, " does not load: ", TorchMessage(e)));
  }
  try {
    torch::Tensor format;
    ar.read("format", format);
    torch::serialize::InputArchive model_ar, opt_ar;
    ar.read("model", model_ar);
    ar.read("optimizer", opt_ar);
    model_->load(model_ar);
    optimizer_->load(opt_ar);
    // A fresh tensor per key: reading into a defined tensor would set_() its storage.
    auto i64 = [&ar](const char* key) {
      torch::Tensor v;
      ar.read(key, v);
      return v.item<int64_t>();
    };
    auto f64 = [&ar](const char* key) {
      torch::Tensor v;
      ar.read(key, v);
      return v.item<double>();
    };
    progress_.epoch = static_cast<int>(i64("epoch"));
    progress_.step = i64("step");
    progress_.samples = i64("samples");
    step_in_epoch_ = i64("step_in_epoch");
    delivered_ = i64("delivered") != 0;
    best_ = f64("best");
    last_accuracy_ = f64("last_accuracy");
    torch::Tensor pending;  // absent from checkpoints written before it existed
    eval_pending_ = ar.try_read("eval_pending", pending) && pending.item<int64_t>() != 0;
    torch::Tensor rng;
    ar.read("rng", rng);
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    gen.set_state(rng);
  } catch (const std::exception& e) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, " is not a ", kCheckpointFormat,
                                            " checkpoint of this model: ", TorchMessage(e)));
  }
  last_checkpoint_step_ = progress_.step;
  last_checkpoint_eval_pending_ = eval_pending_;
  return absl::OkStatus();
}

std::unique_ptr<torch::optim::Optimizer> Trainer::MakeOptimizer() {
  double lr = spec_.ScaledLearningRate(o_.world_size);
  if (spec_.training.optimizer == "sgd") {
    return std::make_unique<torch::optim::SGD>(
        model_->parameters(), torch::optim::SGDOptions(lr)
                                  .momentum(spec_.training.momentum)
                                  .weight_decay(spec_.training.weight_decay));
  }
  return std::make_unique<torch::optim::Adam>(
      model_->parameters(),
      torch::optim::AdamOptions(lr).weight_decay(spec_.training.weight_decay));
}

void Trainer::ReportTraining(bool force) {
  if (o_.rank != 0) return;  // metrics are the job's, reported once
  double now = NowS();
  if (!force && now - last_report_s_ < kReportIntervalS) return;
  if (loss_steps_ == 0) return;
  MetricSample m;
  m.step = progress_.step;
  m.epoch = epoch_in_progress_;
  m.wall_time_ms = SystemClock::Get().NowMs();
  m.train_loss = loss_sum_ / loss_steps_;
  m.samples_per_s = train_seconds_since_report_ > 0
                        ? samples_since_report_ * o_.world_size / train_seconds_since_report_
                        : 0;
  reporter_.Report(m, progress_);
  loss_sum_ = 0;
  loss_steps_ = 0;
  samples_since_report_ = 0;
  train_seconds_since_report_ = 0;
  last_report_s_ = now;
}

absl::Status Trainer::Export(const std::string& kind, double accuracy) {
  RETURN_IF_ERROR(MakeDirs(ModelDir(o_.result_dir, kind)));
  std::ostringstream bytes;
  try {
    torch::save(std::static_pointer_cast<torch::nn::Module>(model_), bytes);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("cannot serialise the model: ", TorchMessage(e)));
  }
  const std::string model_path = ModelPath(o_.result_dir, kind);
  const std::string card_path = ModelCardPath(o_.result_dir, kind);
  RETURN_IF_ERROR(WriteFileAtomic(model_path, bytes.str()));
  nlohmann::json card = {
      {"job_id", o_.job_id},
      {"kind", kind},
      {"architecture", spec_.model.architecture},
      {"format", "torch::save of the module's parameters and buffers (libtorch C++)"},
      {"input", "[N, 1, 28, 28] float32, (pixel/255 - 0.2860) / 0.3530"},
      {"output", "[N, 10] log-probabilities"},
      {"epoch", progress_.epoch},
      {"step", progress_.step},
      {"metrics", {{"test_accuracy", accuracy}, {"best_test_accuracy", best_}}},
      {"manifest_digest", SpecDigest(spec_)},
      {"spec", SpecToJson(spec_)},
      {"created_at", FormatTimeMs(SystemClock::Get().NowMs())},
      {"bytes", bytes.str().size()},
  };
  RETURN_IF_ERROR(WriteFileAtomic(card_path, card.dump(2) + "\n"));
  spdlog::info("{} model written: {} ({} bytes, test_accuracy {:.4f})", kind, model_path,
               bytes.str().size(), accuracy);
  ModelArtifact a{kind, model_path, card_path, accuracy, progress_.epoch, progress_.step,
                  static_cast<int64_t>(bytes.str().size())};
  return reporter_.CommitArtifact(a);
}

absl::Status Trainer::OnPeerLost(const PeerLostError& e) {
  spdlog::warn("lost a peer learner at step {}: {}", progress_.step, e.what());
  if (o_.rank == 0) {
    absl::Status saved = Checkpoint();
    if (saved.ok()) {
      spdlog::info("checkpointed step {}, the last step all learners completed, for the gang's "
                   "restart", progress_.step);
    } else {
      spdlog::warn("no checkpoint after losing a peer: {}", saved.message());
    }
  }
  return absl::UnavailableError(
      absl::StrCat("a peer learner of the gang is gone (", e.what(), ")"));
}

absl::Status Trainer::EvaluateAndCheckTargets(bool* complete) {
  ReportTraining(/*force=*/true);
  Evaluation ev = Evaluate(model_, test_, dp_.get());
  last_accuracy_ = ev.accuracy;
  best_ = std::max(best_, ev.accuracy);
  spdlog::info("evaluation: epoch {} step {} test_accuracy {:.4f} test_loss {:.4f}",
               epoch_in_progress_, progress_.step, ev.accuracy, ev.loss);
  if (o_.rank == 0) {
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
  const TargetSpec& t = spec_.targets;
  if (t.deliver && !delivered_ && ev.accuracy >= *t.deliver) {
    spdlog::info("deliver target met: test_accuracy {:.4f} >= {}", ev.accuracy, *t.deliver);
    if (o_.rank == 0) RETURN_IF_ERROR(Export(kDeliveredModel, ev.accuracy));
    delivered_ = true;
  }
  if (t.complete && ev.accuracy >= *t.complete) {
    complete_met_ = ev.accuracy;
    *complete = true;
  }
  return absl::OkStatus();
}

absl::StatusOr<LoopResult> Trainer::Run() {
  optimizer_ = MakeOptimizer();
  auto& optimizer = optimizer_;
  LoopResult result;
  for (const std::string& path : reporter_.ResumeFrom()) {
    absl::Status s = Restore(path);
    if (s.ok()) {
      spdlog::info("resumed from {}: epoch {}, step {} ({} into the epoch)", path,
                   progress_.epoch, progress_.step, step_in_epoch_);
      result.resumed_from_step = progress_.step;
      break;
    }
    spdlog::warn("skipping checkpoint: {}", s.message());
    if (path == reporter_.ResumeFrom().back()) {
      // Nothing loaded and the model may be half-written: start clean.
      ASSIGN_OR_RETURN(model_, BuildModel(spec_.model));
      optimizer_ = MakeOptimizer();
      progress_ = {};
      step_in_epoch_ = 0;
      best_ = last_accuracy_ = 0;
      delivered_ = false;
      eval_pending_ = false;
    }
  }
  if (o_.world_size > 1) {
    // One consistent state for the whole gang: every rank resumed from the same step, and the
    // replicas start from rank 0's parameters and buffers.
    if (!dp_->AllEqual(progress_.step)) {
      return absl::InternalError(absl::StrCat(
          "the job's learners resumed from different steps (this rank: ", progress_.step,
          "); restarting from the checkpoints again"));
    }
    std::vector<torch::Tensor> state = model_->parameters();
    for (const torch::Tensor& b : model_->buffers()) state.push_back(b);
    dp_->BroadcastFromRank0(state);
  }
  const int64_t bs = spec_.training.batch_size;
  // This learner's share of every epoch: indices rank, rank + world, ... of the permutation, the
  // same number for every rank (up to world_size - 1 samples of each epoch are left out) so all
  // ranks take the same number of steps.
  const int64_t n = train_.size();
  const int64_t per_rank = n / o_.world_size;
  const int64_t steps_per_epoch = (per_rank + bs - 1) / bs;
  progress_.epochs_total = spec_.training.epochs;
  progress_.steps_total = steps_per_epoch * spec_.training.epochs;
  spdlog::info("training {} on {} samples ({} per learner), {} test samples, batch {} per learner "
               "({} in all), {} steps per epoch, {} epochs, {} threads, learning rate {:g}",
               spec_.model.architecture, n, per_rank, test_.size(), bs, bs * o_.world_size,
               steps_per_epoch, spec_.training.epochs, torch::get_num_threads(),
               spec_.ScaledLearningRate(o_.world_size));
  const std::vector<torch::Tensor> parameters = model_->parameters();
  dp_->AttachGradientHooks(parameters);
  model_->train();
  last_report_s_ = NowS();
  last_checkpoint_s_ = NowS();
  bool complete = false;
  try {
  if (eval_pending_) {
    // The gang lost a learner during this evaluation last time: do it now, before training on.
    epoch_in_progress_ = step_in_epoch_ == 0 ? progress_.epoch : progress_.epoch + 1;
    spdlog::info("evaluating step {} first: its evaluation was interrupted", progress_.step);
    RETURN_IF_ERROR(EvaluateAndCheckTargets(&complete));
    eval_pending_ = false;
  }
  for (int epoch = progress_.epoch; epoch < spec_.training.epochs && !complete; ++epoch) {
    epoch_in_progress_ = epoch + 1;
    // Every rank draws the same permutation: seed + epoch.
    auto gen = at::detail::createCPUGenerator(spec_.training.seed * 1000003 + epoch);
    torch::Tensor perm = torch::randperm(n, gen, torch::TensorOptions().dtype(torch::kInt64));
    torch::Tensor mine = perm.slice(0, o_.rank, per_rank * o_.world_size, o_.world_size);
    step_in_epoch_at_start_ = step_in_epoch_;
    for (int64_t s = step_in_epoch_; s < steps_per_epoch; ++s) {
      auto t0 = std::chrono::steady_clock::now();
      torch::Tensor idx = mine.slice(0, s * bs, std::min(per_rank, (s + 1) * bs));
      torch::Tensor x = train_.images.index_select(0, idx);
      torch::Tensor y = train_.labels.index_select(0, idx);
      optimizer->zero_grad();
      // Every rank learns whether any was asked to stop from the step's last collective, so all
      // stop after this same step.
      dp_->BeginStep(StopRequested());
      torch::Tensor loss = torch::nll_loss(model_->forward(x), y);
      loss.backward();
      const bool stop = dp_->FinishStep();
      optimizer->step();
      loss_sum_ += loss.item<double>();
      ++loss_steps_;
      ++progress_.step;
      progress_.samples += idx.size(0) * o_.world_size;
      samples_since_report_ += idx.size(0);
      step_in_epoch_ = s + 1;
      const double step_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      train_seconds_since_report_ += step_seconds;
      epoch_train_seconds_ += step_seconds;
      if (stop) {
        // Keep what was trained: halt and preemption resume from here.
        ReportTraining(/*force=*/true);
        absl::Status saved = Checkpoint();
        if (!saved.ok()) spdlog::warn("no checkpoint on stop: {}", saved.message());
        result.stopped = true;
        result.reason = "stopped on request";
        result.best_test_accuracy = best_;
        return result;
      }
      ReportTraining(/*force=*/false);
      if (CheckpointDue()) RETURN_IF_ERROR(Checkpoint());
      if (spec_.training.eval_every_steps > 0 &&
          progress_.step % spec_.training.eval_every_steps == 0 && s + 1 < steps_per_epoch) {
        eval_pending_ = true;
        RETURN_IF_ERROR(EvaluateAndCheckTargets(&complete));
        eval_pending_ = false;
        if (complete) break;
      }
    }
    if (complete) break;
    progress_.epoch = epoch + 1;
    if (o_.world_size > 1) {
      const int64_t steps = std::max<int64_t>(1, steps_per_epoch - step_in_epoch_at_start_);
      const double wait_ms = dp_->TakeWaitMs();
      spdlog::info("epoch {}: {:.1f} ms per step, of which {:.1f} ms waiting for the gradient "
                   "allreduce after the backward pass ({:.1f}%)",
                   epoch + 1, 1000 * epoch_train_seconds_ / steps, wait_ms,
                   100 * wait_ms * steps / std::max(1e-9, 1000 * epoch_train_seconds_));
    }
    epoch_train_seconds_ = 0;
    step_in_epoch_ = 0;
    eval_pending_ = true;
    RETURN_IF_ERROR(EvaluateAndCheckTargets(&complete));
    eval_pending_ = false;
  }
  } catch (const PeerLostError& e) {
    return OnPeerLost(e);
  }
  {
    // Replicas must agree bit for bit; the sum of all parameters shows it in each rank's log.
    torch::NoGradGuard no_grad;
    double checksum = 0;
    for (const torch::Tensor& p : parameters) checksum += p.to(torch::kFloat64).sum().item<double>();
    spdlog::info("parameters checksum {:.10e} at step {}", checksum, progress_.step);
  }
  if (o_.rank == 0) {
    if (complete) {
      result.reason = absl::StrFormat("target met: test_accuracy %.4f >= %g", complete_met_,
                                      *spec_.targets.complete);
    } else if (spec_.targets.complete) {
      result.reason = absl::StrFormat("budget exhausted, best %.4f (target %g)", best_,
                                      *spec_.targets.complete);
    } else {
      result.reason = absl::StrFormat("budget exhausted: %d epochs, test_accuracy %.4f",
                                      spec_.training.epochs, last_accuracy_);
    }
    RETURN_IF_ERROR(Export(kFinalModel, last_accuracy_));
  }
  if (o_.rank != 0) {
    result.reason = absl::StrFormat("rank %d of %d done at step %d; rank 0 writes the final model",
                                    o_.rank, o_.world_size, progress_.step);
  }
  result.succeeded = true;
  result.best_test_accuracy = best_;
  result.final_test_accuracy = last_accuracy_;
  return result;
}

}  // namespace

absl::StatusOr<LoopResult> RunTraining(const LoopOptions& options, Reporter& reporter) {
  try {
    torch::manual_seed(options.spec.training.seed);
    torch::set_num_threads(options.spec.EffectiveThreads());
    ASSIGN_OR_RETURN(Dataset train, LoadDataset(options.spec.data.path, "train",
                                                options.spec.data.train_samples));
    ASSIGN_OR_RETURN(Dataset test, LoadDataset(options.spec.data.path, "test",
                                               options.spec.data.test_samples));
    ASSIGN_OR_RETURN(Model model, BuildModel(options.spec.model));
    spdlog::info("dense layers: {}", DenseKernelFromEnvironment() == DenseKernel::kOneDnn
                                         ? "oneDNN, as the equivalent convolutions"
                                         : "the system BLAS (WEFT_LEARNER_DENSE=blas)");
    std::unique_ptr<DataParallel> dp = DataParallel::Local();
    if (options.world_size > 1) {
      ASSIGN_OR_RETURN(dp, DataParallel::Connect(options.rendezvous_host, options.rendezvous_port,
                                                 options.rank, options.world_size,
                                                 options.rendezvous_timeout_ms));
    }
    Trainer trainer(options, reporter, std::move(model), std::move(train), std::move(test),
                    std::move(dp));
    return trainer.Run();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("libtorch: ", TorchMessage(e)));
  }
}

absl::StatusOr<double> EvaluateSavedModel(const ModelSpec& spec, const std::string& model_path,
                                          const std::string& data_dir, int64_t limit) {
  try {
    ASSIGN_OR_RETURN(Model model, BuildModel(spec));
    auto module = std::static_pointer_cast<torch::nn::Module>(model);
    torch::load(module, model_path);
    ASSIGN_OR_RETURN(Dataset test, LoadDataset(data_dir, "test", limit));
    return Evaluate(model, test).accuracy;
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load model ", model_path, ": ", TorchMessage(e)));
  }
}

}  // namespace weft::train
