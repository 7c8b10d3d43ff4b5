// What every built-in training loop shares (TrainingRun): evaluation, the targets and the
// delivered model, training-loss reports, the checkpoint's common keys and its commit, and the
// exported models with their model cards. Every file is written atomically through the run's Env
// before weftd is asked to commit it.
#include "train/training_run.h"

#include <cmath>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/clock.h"
#include "common/failpoint.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "job/layout.h"
#include "train/data_parallel.h"

namespace weft::train {
namespace {

constexpr int64_t kEvalBatch = 1000;
constexpr double kReportIntervalS = 1.0;

double NowS() { return SystemClock::Get().NowMs() / 1000.0; }

// What the delivered model's forward takes, for its model card.
std::string InputDescription(const std::vector<int64_t>& sample_shape, const std::string& format) {
  const std::string shape = absl::StrCat("[N, ", absl::StrJoin(sample_shape, ", "), "] float32");
  if (format == "csv") return shape + ", the CSV's feature columns as written";
  if (format == "tensors") return shape + ", the data set's train_x/test_x as float32";
  return shape + ", (pixel/255 - 0.2860) / 0.3530";
}

}  // namespace

std::string TorchMessage(const std::exception& e) {
  if (const auto* c10 = dynamic_cast<const c10::Error*>(&e)) return c10->what_without_backtrace();
  return e.what();
}

bool StopRequested(const LoopOptions& o, const Reporter& reporter) {
  return (o.stop_requested && o.stop_requested->load()) || !reporter.KeepRunning();
}

absl::StatusOr<Evaluation> Evaluate(const Model& model, const Dataset& test, DataParallel* dp) {
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
    torch::Tensor out = model->forward(test.Range(i, end));
    torch::Tensor y = test.labels.slice(0, i, end);
    loss += torch::nll_loss(out, y, {}, torch::Reduction::Sum).item<double>();
    correct += out.argmax(1).eq(y).sum().item<int64_t>();
  }
  model->train();
  if (dp) {
    Failpoint("evaluation-before-allreduce");
    ASSIGN_OR_RETURN(const std::vector<double> sums, dp->Sum({static_cast<double>(correct), loss}));
    correct = static_cast<int64_t>(std::llround(sums[0]));
    loss = sums[1];
  }
  return Evaluation{static_cast<double>(correct) / test.size(), loss / test.size()};
}

absl::Status ExportModel(const ModelExport& e) {
  const LoopOptions& o = e.options;
  RETURN_IF_ERROR(e.env.MakeDirs(ModelDir(o.learner.result_dir, e.kind)));
  std::ostringstream bytes;
  try {
    e.model.Save(bytes);  // TorchScript: torch.jit.load reads it, in Python or C++
  } catch (const std::exception& ex) {
    return absl::InternalError(absl::StrCat("cannot serialise the model: ", TorchMessage(ex)));
  }
  const std::string model_path = ModelPath(o.learner.result_dir, e.kind);
  const std::string card_path = ModelCardPath(o.learner.result_dir, e.kind);
  RETURN_IF_ERROR(WriteFileAtomic(e.env, model_path, bytes.str()));
  nlohmann::json card = {
      {"job_id", o.learner.job_id},
      {"kind", e.kind},
      {"architecture", o.spec.model.architecture},
      {"format", "TorchScript (torch.jit.save): torch.jit.load in Python, torch::jit::load in C++"},
      {"input", InputDescription(e.sample_shape, o.learner.data_format)},
      {"output", absl::StrCat("[N, ", e.classes, "] logits")},
      {"epoch", e.epoch},
      {"step", e.step},
      {"metrics", {{"test_accuracy", e.accuracy}, {"best_test_accuracy", e.best}}},
      {"manifest_digest", SpecDigest(o.spec)},
      {"spec", SpecToJson(o.spec)},
      {"created_at", FormatTimeMs(SystemClock::Get().NowMs())},
      {"bytes", bytes.str().size()},
  };
  RETURN_IF_ERROR(WriteFileAtomic(e.env, card_path, card.dump(2) + "\n"));
  spdlog::info("{} model written: {} ({} bytes, test_accuracy {:.4f})", e.kind, model_path,
               bytes.str().size(), e.accuracy);
  ModelFile a{e.kind,
              model_path,
              card_path,
              e.accuracy,
              e.epoch,
              e.step,
              static_cast<int64_t>(bytes.str().size())};
  return e.reporter.CommitModel(a);
}

TrainingRun::TrainingRun(const LoopOptions& o, Reporter& r, Model model, Dataset train,
                         Dataset test)
    : o_(o),
      env_(o.env ? *o.env : Env::Default()),
      reporter_(r),
      model_(std::move(model)),
      train_(std::move(train)),
      test_(std::move(test)),
      classes_(NumClasses(train_, test_)),
      targets_(o.spec.targets) {}

void TrainingRun::StartClocks() { last_report_s_ = last_checkpoint_s_ = NowS(); }

void TrainingRun::AddLoss(double loss) {
  loss_sum_ += loss;
  ++loss_steps_;
}

bool TrainingRun::ReportDue(double now_s, bool force) const {
  return loss_steps_ > 0 && (force || now_s - last_report_s_ >= kReportIntervalS);
}

void TrainingRun::ReportLoss(int epoch, double samples_per_s, int world_size, double now_s) {
  MetricSample m;
  m.step = progress_.step;
  m.epoch = epoch;
  m.wall_time_ms = SystemClock::Get().NowMs();
  m.train_loss = loss_steps_ > 0 ? loss_sum_ / loss_steps_ : 0;
  m.samples_per_s = samples_per_s;
  m.world_size = world_size;
  reporter_.Report(m, progress_);
  loss_sum_ = 0;
  loss_steps_ = 0;
  last_report_s_ = now_s;
}

absl::StatusOr<bool> TrainingRun::ActOnEvaluation(const Evaluation& ev, int epoch, bool leads) {
  const TargetTracker::Decision decision = targets_.Observe(ev.accuracy);
  if (leads) {
    MetricSample m;
    m.step = progress_.step;
    m.epoch = epoch;
    m.wall_time_ms = SystemClock::Get().NowMs();
    m.test_accuracy = ev.accuracy;
    m.test_loss = ev.loss;
    reporter_.Report(m, progress_);
  }
  if (decision.deliver) {
    spdlog::info("deliver target met: test_accuracy {:.4f} >= {}", ev.accuracy,
                 *o_.spec.targets.deliver);
    if (leads) RETURN_IF_ERROR(Export(kDeliveredModel, ev.accuracy));
    targets_.MarkDelivered();
  }
  return decision.complete;
}

void TrainingRun::WriteCommonKeys(torch::serialize::OutputArchive& ar, int64_t step) const {
  ar.write("step", torch::tensor(step, torch::kInt64));
  ar.write("delivered", torch::tensor(int64_t{targets_.delivered() ? 1 : 0}, torch::kInt64));
  ar.write("best", torch::tensor(targets_.best(), torch::kFloat64));
  ar.write("last_accuracy", torch::tensor(targets_.last(), torch::kFloat64));
}

int64_t TrainingRun::ReadCommonKeys(torch::serialize::InputArchive& ar) {
  auto read = [&ar](const char* key) {
    torch::Tensor v;  // a fresh tensor per key: reading into a defined one would set_() it
    ar.read(key, v);
    return v;
  };
  const int64_t step = read("step").item<int64_t>();
  targets_.Restore(read("best").item<double>(), read("last_accuracy").item<double>(),
                   read("delivered").item<int64_t>() != 0);
  return step;
}

absl::StatusOr<bool> TrainingRun::CommitCheckpoint(const std::string& bytes, int64_t step,
                                                   std::chrono::steady_clock::time_point started,
                                                   bool tolerate_disk_errors,
                                                   const std::string& detail) {
  const std::string& dir = o_.learner.checkpoint_dir;
  const std::string path = CheckpointPath(dir, step);
  absl::Status written = env_.MakeDirs(dir);
  if (written.ok()) written = WriteFileAtomic(env_, path, bytes);
  if (!written.ok()) {
    if (!tolerate_disk_errors) return written;
    // The latest committed checkpoint stands; the next one is tried when due.
    last_checkpoint_s_ = NowS();
    spdlog::warn(
        "checkpoint at step {} not written ({}); training goes on and tries again at the next "
        "checkpoint",
        step, written.message());
    return false;
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  spdlog::info("checkpoint written: {} (step {}{}, {} bytes, {:.0f} ms)", path, step, detail,
               bytes.size(), ms);
  Failpoint("checkpoint-before-commit");
  RETURN_IF_ERROR(reporter_.CommitCheckpoint(path, progress_.epoch, step,
                                             static_cast<int64_t>(bytes.size()), ms / 1000));
  last_checkpoint_step_ = step;
  last_checkpoint_s_ = NowS();
  return true;
}

void TrainingRun::RestartCheckpointClock() { last_checkpoint_s_ = NowS(); }

absl::Status TrainingRun::Export(const std::string& kind, double accuracy) {
  return ExportModel({o_, env_, reporter_, *model_, train_.SampleShape(), classes_, kind, accuracy,
                      targets_.best(), progress_.epoch, progress_.step});
}

}  // namespace weft::train
