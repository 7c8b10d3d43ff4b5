// What of an allreduce gang outlives a learner process: its checkpoints (the run's common keys —
// step, targets — and the model, optimizer, epoch, position in the epoch's permutation, RNG
// state and a pending evaluation) and resuming from them, or from rank 0's state handed over in
// an elastic regroup. TrainingRun writes and commits the file.
#include <ATen/CPUGeneratorImpl.h>

#include <chrono>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/env.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "train/trainer.h"

namespace weft::train {
namespace {

// An allreduce gang's checkpoint ("weft-checkpoint-v1"); a parameter server's is 2
// (ps_checkpoint.cc).
constexpr int64_t kCheckpointFormat = 1;

double NowS() { return SystemClock::Get().NowMs() / 1000.0; }

}  // namespace

absl::StatusOr<int64_t> Trainer::ResumeFromCheckpoints() {
  const std::vector<std::string> paths = run_.reporter().ResumeFrom();
  for (const std::string& path : paths) {
    absl::Status s = Restore(path);
    if (s.ok()) {
      spdlog::info("resumed from {}: epoch {}, step {} ({} samples into the epoch)", path,
                   run_.progress().epoch, run_.progress().step, epoch_offset_);
      return run_.progress().step;
    }
    spdlog::warn("skipping checkpoint: {}", s.message());
  }
  if (!paths.empty()) {
    // Nothing loaded and the model may be half-written: start clean.
    ASSIGN_OR_RETURN(run_.model(), BuildModel(run_.spec().model, run_.options().learner.model_dir,
                                              run_.train().SampleShape(), run_.classes(),
                                              run_.options().kernels));
    optimizer_ = MakeOptimizer();
    run_.progress() = {};
    epoch_offset_ = 0;
    run_.targets().Reset();
    eval_pending_ = false;
  }
  return -1;
}

absl::StatusOr<std::string> Trainer::SerializeState() {
  std::ostringstream bytes;
  try {
    torch::serialize::OutputArchive ar;
    torch::serialize::OutputArchive model_ar, opt_ar;
    run_.model()->save(model_ar);
    optimizer_->save(opt_ar);
    ar.write("model", model_ar);
    ar.write("optimizer", opt_ar);
    auto i64 = [](int64_t v) { return torch::tensor(v, torch::kInt64); };
    ar.write("format", i64(kCheckpointFormat));
    run_.WriteCommonKeys(ar, run_.progress().step);
    ar.write("epoch", i64(run_.progress().epoch));
    ar.write("samples", i64(run_.progress().samples));
    ar.write("epoch_offset", i64(epoch_offset_));
    ar.write("eval_pending", i64(eval_pending_ ? 1 : 0));
    ar.write("rng", at::detail::getDefaultCPUGenerator().get_state());
    ar.save_to(bytes);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("cannot serialise a checkpoint: ", TorchMessage(e)));
  }
  return std::move(bytes).str();
}

absl::Status Trainer::Checkpoint(bool tolerate_disk_errors) {
  const int64_t step = run_.progress().step;
  if (rank() != 0 || run_.options().learner.checkpoint_dir.empty() ||
      (step == run_.last_checkpoint_step() && eval_pending_ == last_checkpoint_eval_pending_)) {
    return absl::OkStatus();  // this state is on disk already
  }
  const auto t0 = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(const std::string bytes, SerializeState());
  ASSIGN_OR_RETURN(const bool committed,
                   run_.CommitCheckpoint(bytes, step, t0, tolerate_disk_errors));
  if (committed) last_checkpoint_eval_pending_ = eval_pending_;
  return absl::OkStatus();
}

bool Trainer::CheckpointDue() const {
  const CheckpointSpec& c = run_.spec().checkpoint;
  if (c.every_steps > 0 && run_.progress().step % c.every_steps == 0) return true;
  return c.every_seconds > 0 && NowS() - run_.last_checkpoint_s() >= c.every_seconds;
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
    if (format.item<int64_t>() != kCheckpointFormat) {
      return absl::DataLossError(absl::StrCat("checkpoint ", path, " is of format ",
                                              format.item<int64_t>(), ", not an allreduce gang's (",
                                              kCheckpointFormat, ")"));
    }
    torch::serialize::InputArchive model_ar, opt_ar;
    ar.read("model", model_ar);
    ar.read("optimizer", opt_ar);
    LoadParameters(*run_.model(), model_ar);
    optimizer_->load(opt_ar);
    // A fresh tensor per key: reading into a defined tensor would set_() its storage.
    auto i64 = [&ar](const char* key) {
      torch::Tensor v;
      ar.read(key, v);
      return v.item<int64_t>();
    };
    run_.progress().step = run_.ReadCommonKeys(ar);
    run_.progress().epoch = static_cast<int>(i64("epoch"));
    run_.progress().samples = i64("samples");
    torch::Tensor offset;
    if (ar.try_read("epoch_offset", offset)) {
      epoch_offset_ = offset.item<int64_t>();
    } else {
      // Written before the offset existed, by a fixed gang of this same size: whole steps of
      // batch_size samples per rank.
      epoch_offset_ = i64("step_in_epoch") * GlobalBatch();
    }
    if (epoch_offset_ < 0 || epoch_offset_ > run_.train().size()) {
      return absl::DataLossError(absl::StrCat("checkpoint ", path, " is ", epoch_offset_,
                                              " samples into an epoch of ", run_.train().size()));
    }
    torch::Tensor pending;  // absent from checkpoints written before it existed
    eval_pending_ = ar.try_read("eval_pending", pending) && pending.item<int64_t>() != 0;
    torch::Tensor rng;
    ar.read("rng", rng);
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    gen.set_state(rng);
  } catch (const std::exception& e) {
    return absl::DataLossError(
        absl::StrCat("checkpoint ", path,
                     " is not an allreduce gang's checkpoint of this model: ", TorchMessage(e)));
  }
  run_.set_last_checkpoint_step(run_.progress().step);
  last_checkpoint_eval_pending_ = eval_pending_;
  return absl::OkStatus();
}

}  // namespace weft::train
