// A parameter-server job's checkpoints: the server's state (parameters, optimizer state, version,
// and each learner's position in its share of the data) as one snapshot per shard — the
// scale-up server's taken between two of the applier's passes, each weft-ps shard's between two
// of its pushes — with the job's evaluation state; and resuming a server from the newest
// checkpoint that loads. One shard's keys are ps_version, ps_params, ps_optimizer_state and
// ps_positions; K > 1 shards' carry the suffix _0 … _K-1, and ps_shards says K.
#include <chrono>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status_macros.h"
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

// The shards of `path`'s server state, checked against the job: `shards` of them covering `n`
// parameters in ShardRange order, a position per learner each. InvalidArgument naming what does
// not match.
absl::StatusOr<ps::ShardedState> ReadShards(torch::serialize::InputArchive& ar, int shards,
                                            int64_t n, int learners) {
  auto read = [&ar](const std::string& key) {
    torch::Tensor v;  // a fresh tensor per key: reading into a defined one would set_() it
    ar.read(key, v);
    return v;
  };
  torch::Tensor count;
  const int stored = ar.try_read("ps_shards", count) ? static_cast<int>(count.item<int64_t>()) : 1;
  if (stored != shards) {
    return absl::InvalidArgumentError(
        absl::StrCat("it holds ", stored, " shards; the job has ", shards));
  }
  ps::ShardedState state;
  for (int i = 0; i < shards; ++i) {
    const std::string suffix = shards == 1 ? "" : absl::StrCat("_", i);
    torch::Tensor params = read("ps_params" + suffix), positions = read("ps_positions" + suffix);
    const int64_t size = ps::ShardRange(n, shards, i).size();
    if (params.scalar_type() != torch::kFloat32 || params.numel() != size ||
        positions.scalar_type() != torch::kInt64 || positions.numel() != learners) {
      return absl::InvalidArgumentError(absl::StrCat("shard ", i, " holds ", params.numel(),
                                                     " parameters and ", positions.numel(),
                                                     " positions, not ", size, " and ", learners));
    }
    ps::ServerState s;
    s.version = static_cast<uint64_t>(read("ps_version" + suffix).item<int64_t>());
    s.params = ToVector<float>(params);
    s.optimizer_state = ToVector<float>(read("ps_optimizer_state" + suffix).to(torch::kFloat32));
    s.positions = ToVector<int64_t>(positions);
    state.shards.push_back(std::move(s));
  }
  return state;
}

}  // namespace

ps::ShardedState PsTrainer::ResumeState(int64_t* step) {
  const int shards = std::max(1, run_.spec().ParameterServers());
  for (const std::string& path : run_.reporter().ResumeFrom()) {
    ps::ShardedState state;
    try {
      torch::serialize::InputArchive ar;
      ar.load_from(path);
      auto read = [&ar](const char* key) {
        torch::Tensor v;
        ar.read(key, v);
        return v;
      };
      if (read("format").item<int64_t>() != kPsCheckpointFormat) {
        spdlog::warn("skipping checkpoint {}: not a parameter server's", path);
        continue;
      }
      absl::StatusOr<ps::ShardedState> shards_read =
          ReadShards(ar, shards, params_.numel(), world());
      if (!shards_read.ok()) {
        spdlog::warn("skipping checkpoint {}: {}", path, shards_read.status().message());
        continue;
      }
      state = std::move(*shards_read);
      evaluated_epochs_ = static_cast<int>(read("evaluated_epochs").item<int64_t>());
      evaluated_step_ = read("evaluated_step").item<int64_t>();
      *step = run_.ReadCommonKeys(ar);
    } catch (const std::exception& e) {
      spdlog::warn("skipping checkpoint {}: it does not load: {}", path, TorchMessage(e));
      continue;
    }
    run_.set_last_checkpoint_step(*step);
    std::string versions, positions;
    for (const ps::ServerState& shard : state.shards) {
      absl::StrAppend(&versions, versions.empty() ? "" : ", ", shard.version);
      absl::StrAppend(&positions, positions.empty() ? "" : " ", "[",
                      absl::StrJoin(shard.positions, ", "), "]");
    }
    spdlog::info("resumed from {}: version {}, step {} (shards: versions [{}], positions {})", path,
                 state.shards[0].version, *step, versions, positions);
    return state;
  }
  return {};  // none loads: the fresh model
}

absl::Status PsTrainer::Checkpoint() {
  run_.RestartCheckpointClock();
  if (run_.options().learner.checkpoint_dir.empty()) return absl::OkStatus();
  const auto t0 = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(const ps::ShardedState state, link_->Snapshot());
  // A learner's data position is the smallest of its shards': a push that reached some shards
  // only is replayed from there, and the shards that have it take it as a duplicate.
  int64_t step = 0;
  for (int64_t p : state.ResumePositions()) step += p;
  if (step == run_.last_checkpoint_step()) return absl::OkStatus();  // on disk already
  std::ostringstream bytes;
  try {
    torch::serialize::OutputArchive ar;
    ar.write("format", Int64(kPsCheckpointFormat));
    auto floats = [](const std::vector<float>& v) {
      return torch::tensor(at::ArrayRef<float>(v), torch::kFloat32);
    };
    const size_t shards = state.shards.size();
    if (shards > 1) ar.write("ps_shards", Int64(static_cast<int64_t>(shards)));
    for (size_t i = 0; i < shards; ++i) {
      const ps::ServerState& s = state.shards[i];
      const std::string suffix = shards == 1 ? "" : absl::StrCat("_", i);
      ar.write("ps_version" + suffix, Int64(static_cast<int64_t>(s.version)));
      ar.write("ps_params" + suffix, floats(s.params));
      ar.write("ps_optimizer_state" + suffix, floats(s.optimizer_state));
      ar.write("ps_positions" + suffix,
               torch::tensor(at::ArrayRef<int64_t>(s.positions), torch::kInt64));
    }
    run_.WriteCommonKeys(ar, step);
    ar.write("evaluated_epochs", Int64(evaluated_epochs_));
    ar.write("evaluated_step", Int64(evaluated_step_));
    ar.save_to(bytes);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("cannot serialise a checkpoint: ", TorchMessage(e)));
  }
  return run_
      .CommitCheckpoint(bytes.str(), step, t0, /*tolerate_disk_errors=*/true,
                        absl::StrCat(", version ", state.shards[0].version))
      .status();
}

}  // namespace weft::train
