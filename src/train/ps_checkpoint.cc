// A parameter-server job's checkpoints: the server's state (parameters, optimizer state, version,
// and each learner's position in its share of the data) as one snapshot taken between two of the
// applier's passes, with the job's evaluation state; and resuming a server from the newest
// checkpoint that loads.
#include <chrono>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "job/layout.h"
#include "train/ps_trainer.h"

namespace weft::train {
namespace {

constexpr int64_t kPsCheckpointFormat = 2;  // 1: an allreduce gang's (trainer_state.cc)

torch::Tensor Int64(int64_t v) { return torch::tensor(v, torch::kInt64); }

template <typename T>
std::vector<T> ToVector(const torch::Tensor& t) {
  torch::Tensor c = t.contiguous();
  return std::vector<T>(c.data_ptr<T>(), c.data_ptr<T>() + c.numel());
}

}  // namespace

absl::StatusOr<ps::ServerState> PsTrainer::ResumeState(int64_t* step) {
  for (const std::string& path : reporter_.ResumeFrom()) {
    ps::ServerState state;
    try {
      torch::serialize::InputArchive ar;
      ar.load_from(path);
      // A fresh tensor per key: reading into a defined tensor would set_() its storage.
      auto read = [&ar](const char* key) {
        torch::Tensor v;
        ar.read(key, v);
        return v;
      };
      if (read("format").item<int64_t>() != kPsCheckpointFormat) {
        spdlog::warn("skipping checkpoint {}: not a parameter server's", path);
        continue;
      }
      torch::Tensor params = read("ps_params"), positions = read("ps_positions");
      if (params.scalar_type() != torch::kFloat32 || params.numel() != params_.numel() ||
          positions.scalar_type() != torch::kInt64 || positions.numel() != world()) {
        spdlog::warn("skipping checkpoint {}: {} parameters and {} positions, not {} and {}", path,
                     params.numel(), positions.numel(), params_.numel(), world());
        continue;
      }
      state.version = static_cast<uint64_t>(read("ps_version").item<int64_t>());
      state.params = ToVector<float>(params);
      state.optimizer_state = ToVector<float>(read("ps_optimizer_state").to(torch::kFloat32));
      state.positions = ToVector<int64_t>(positions);
      evaluated_epochs_ = static_cast<int>(read("evaluated_epochs").item<int64_t>());
      evaluated_step_ = read("evaluated_step").item<int64_t>();
      delivered_ = read("delivered").item<int64_t>() != 0;
      best_ = read("best").item<double>();
      last_accuracy_ = read("last_accuracy").item<double>();
      *step = read("step").item<int64_t>();
    } catch (const std::exception& e) {
      spdlog::warn("skipping checkpoint {}: it does not load: {}", path, TorchMessage(e));
      continue;
    }
    last_checkpoint_step_ = *step;
    spdlog::info("resumed from {}: version {}, step {}", path, state.version, *step);
    return state;
  }
  ps::ServerState fresh;  // the model as built from the seed
  fresh.params = ToVector<float>(params_);
  return fresh;
}

absl::Status PsTrainer::Checkpoint() {
  last_checkpoint_s_ = SystemClock::Get().NowMs() / 1000.0;
  if (o_.learner.checkpoint_dir.empty()) return absl::OkStatus();
  const auto t0 = std::chrono::steady_clock::now();
  const ps::ServerState state = server_->TakeSnapshot();
  int64_t step = 0;
  for (int64_t p : state.positions) step += p;
  if (step == last_checkpoint_step_) return absl::OkStatus();  // on disk already
  std::ostringstream bytes;
  try {
    torch::serialize::OutputArchive ar;
    ar.write("format", Int64(kPsCheckpointFormat));
    ar.write("ps_version", Int64(static_cast<int64_t>(state.version)));
    auto floats = [](const std::vector<float>& v) {
      return torch::tensor(at::ArrayRef<float>(v), torch::kFloat32);
    };
    ar.write("ps_params", floats(state.params));
    ar.write("ps_optimizer_state", floats(state.optimizer_state));
    ar.write("ps_positions", torch::tensor(at::ArrayRef<int64_t>(state.positions), torch::kInt64));
    ar.write("step", Int64(step));
    ar.write("evaluated_epochs", Int64(evaluated_epochs_));
    ar.write("evaluated_step", Int64(evaluated_step_));
    ar.write("delivered", Int64(delivered_ ? 1 : 0));
    ar.write("best", torch::tensor(best_, torch::kFloat64));
    ar.write("last_accuracy", torch::tensor(last_accuracy_, torch::kFloat64));
    ar.save_to(bytes);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("cannot serialise a checkpoint: ", TorchMessage(e)));
  }
  const std::string path = CheckpointPath(o_.learner.checkpoint_dir, step);
  absl::Status written = env_.MakeDirs(o_.learner.checkpoint_dir);
  if (written.ok()) written = WriteFileAtomic(env_, path, bytes.str());
  if (!written.ok()) {
    // The latest committed checkpoint stands; the next one is tried when due.
    spdlog::warn("checkpoint at step {} not written ({}); training goes on", step,
                 written.message());
    return absl::OkStatus();
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info("checkpoint written: {} (step {}, version {}, {} bytes, {:.0f} ms)", path, step,
               state.version, bytes.str().size(), ms);
  RETURN_IF_ERROR(reporter_.CommitCheckpoint(path, progress_.epoch, step,
                                             static_cast<int64_t>(bytes.str().size()), ms / 1000));
  last_checkpoint_step_ = step;
  return absl::OkStatus();
}

}  // namespace weft::train
