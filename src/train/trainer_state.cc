// What outlives a learner process: checkpoints (model, optimizer, epoch, position in the epoch's
// permutation, RNG state, best accuracy, delivered flag, a pending evaluation), resuming from
// them, and the delivered and final models with their model cards. Every file is written
// atomically through the trainer's Env before weftd is asked to commit it.
#include <ATen/CPUGeneratorImpl.h>

#include <chrono>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/clock.h"
#include "common/env.h"
#include "common/failpoint.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "job/layout.h"
#include "train/trainer.h"

namespace weft::train {
namespace {

constexpr char kCheckpointFormat[] = "weft-checkpoint-v1";

double NowS() { return SystemClock::Get().NowMs() / 1000.0; }

}  // namespace

absl::StatusOr<int64_t> Trainer::ResumeFromCheckpoints() {
  const std::vector<std::string> paths = reporter_.ResumeFrom();
  for (const std::string& path : paths) {
    absl::Status s = Restore(path);
    if (s.ok()) {
      spdlog::info("resumed from {}: epoch {}, step {} ({} samples into the epoch)", path,
                   progress_.epoch, progress_.step, epoch_offset_);
      return progress_.step;
    }
    spdlog::warn("skipping checkpoint: {}", s.message());
  }
  if (!paths.empty()) {
    // Nothing loaded and the model may be half-written: start clean.
    ASSIGN_OR_RETURN(model_, BuildModel(spec_.model, o_.learner.model_dir, train_.SampleShape(),
                                        classes_, o_.kernels));
    optimizer_ = MakeOptimizer();
    progress_ = {};
    epoch_offset_ = 0;
    targets_.Reset();
    eval_pending_ = false;
  }
  return -1;
}

absl::StatusOr<std::string> Trainer::SerializeState() {
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
    ar.write("epoch_offset", i64(epoch_offset_));
    ar.write("delivered", i64(targets_.delivered() ? 1 : 0));
    ar.write("eval_pending", i64(eval_pending_ ? 1 : 0));
    ar.write("best", torch::tensor(targets_.best(), torch::kFloat64));
    ar.write("last_accuracy", torch::tensor(targets_.last(), torch::kFloat64));
    ar.write("rng", at::detail::getDefaultCPUGenerator().get_state());
    ar.save_to(bytes);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("cannot serialise a checkpoint: ", TorchMessage(e)));
  }
  return std::move(bytes).str();
}

absl::Status Trainer::Checkpoint(bool tolerate_disk_errors) {
  if (rank() != 0 || o_.learner.checkpoint_dir.empty() ||
      (progress_.step == last_checkpoint_step_ && eval_pending_ == last_checkpoint_eval_pending_)) {
    return absl::OkStatus();  // this state is on disk already
  }
  auto t0 = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(const std::string bytes, SerializeState());
  const std::string path = CheckpointPath(o_.learner.checkpoint_dir, progress_.step);
  absl::Status written = env_.MakeDirs(o_.learner.checkpoint_dir);
  if (written.ok()) written = WriteFileAtomic(env_, path, bytes);
  if (!written.ok()) {
    if (!tolerate_disk_errors) return written;
    // The latest committed checkpoint stands; try again when the next one is due.
    last_checkpoint_s_ = NowS();
    spdlog::warn(
        "checkpoint at step {} not written ({}); training goes on and tries again at the "
        "next checkpoint",
        progress_.step, written.message());
    return absl::OkStatus();
  }
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info("checkpoint written: {} (step {}, {} bytes, {:.0f} ms)", path, progress_.step,
               bytes.size(), ms);
  Failpoint("checkpoint-before-commit");
  RETURN_IF_ERROR(reporter_.CommitCheckpoint(path, progress_.epoch, progress_.step,
                                             static_cast<int64_t>(bytes.size()), ms / 1000));
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
    return absl::DataLossError(
        absl::StrCat("checkpoint ", path, " does not load: ", TorchMessage(e)));
  }
  return LoadState(ar, path);
}

absl::Status Trainer::RestoreFromBytes(const std::string& bytes) {
  torch::serialize::InputArchive ar;
  try {
    std::istringstream in(bytes);
    ar.load_from(in);
  } catch (const std::exception& e) {
    return absl::DataLossError(
        absl::StrCat("rank 0's training state does not load: ", TorchMessage(e)));
  }
  return LoadState(ar, "from rank 0");
}

absl::Status Trainer::LoadState(torch::serialize::InputArchive& ar, const std::string& path) {
  try {
    torch::Tensor format;
    ar.read("format", format);
    torch::serialize::InputArchive model_ar, opt_ar;
    ar.read("model", model_ar);
    ar.read("optimizer", opt_ar);
    LoadParameters(*model_, model_ar);
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
    torch::Tensor offset;
    if (ar.try_read("epoch_offset", offset)) {
      epoch_offset_ = offset.item<int64_t>();
    } else {
      // Written before the offset existed, by a fixed gang of this same size: whole steps of
      // batch_size samples per rank.
      epoch_offset_ = i64("step_in_epoch") * spec_.training.batch_size * world();
    }
    if (epoch_offset_ < 0 || epoch_offset_ > train_.size()) {
      return absl::DataLossError(absl::StrCat("checkpoint ", path, " is ", epoch_offset_,
                                              " samples into an epoch of ", train_.size()));
    }
    targets_.Restore(f64("best"), f64("last_accuracy"), i64("delivered") != 0);
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

namespace {

// What the delivered model's forward takes, for its model card.
std::string InputDescription(const std::vector<int64_t>& sample_shape, const std::string& format) {
  const std::string shape = absl::StrCat("[N, ", absl::StrJoin(sample_shape, ", "), "] float32");
  if (format == "csv") return shape + ", the CSV's feature columns as written";
  if (format == "tensors") return shape + ", the data set's train_x/test_x as float32";
  return shape + ", (pixel/255 - 0.2860) / 0.3530";
}

}  // namespace

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

absl::Status Trainer::Export(const std::string& kind, double accuracy) {
  return ExportModel({o_, env_, reporter_, *model_, train_.SampleShape(), classes_, kind, accuracy,
                      targets_.best(), progress_.epoch, progress_.step});
}

}  // namespace weft::train
