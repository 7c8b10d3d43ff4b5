#include "ps/shard.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "ps/update.h"

namespace weft::ps {
namespace {

// How often a waiting push looks at the clock again (for leases that expire meanwhile).
constexpr int64_t kWaitSliceMs = 50;

}  // namespace

KeyRange ShardRange(int64_t num_params, int shards, int index) {
  const int64_t base = num_params / shards;
  const int64_t extra = num_params % shards;  // the first `extra` shards hold one more
  KeyRange r;
  r.begin = index * base + std::min<int64_t>(index, extra);
  r.end = r.begin + base + (index < extra ? 1 : 0);
  return r;
}

absl::StatusOr<std::unique_ptr<Shard>> Shard::Create(const ServerConfig& config, ServerState state,
                                                     NowMsFn now) {
  if (absl::Status s = ValidateServerConfig(config); !s.ok()) return s;
  const auto n = static_cast<size_t>(config.num_params);
  const size_t state_floats = n * static_cast<size_t>(StateFloatsPerParam(config.optimizer));
  const auto learners = static_cast<size_t>(config.num_slots);
  auto mismatch = [](const char* what, size_t got, size_t want) {
    return absl::InvalidArgumentError(absl::StrCat("the shard's ", what, " has ", got,
                                                   " entries; its configuration needs ", want));
  };
  if (state.params.size() != n) return mismatch("parameters", state.params.size(), n);
  if (state.optimizer_state.empty()) state.optimizer_state.assign(state_floats, 0.0f);
  if (state.optimizer_state.size() != state_floats) {
    return mismatch("optimizer state", state.optimizer_state.size(), state_floats);
  }
  if (state.positions.empty()) state.positions.assign(learners, 0);
  if (state.positions.size() != learners) {
    return mismatch("positions", state.positions.size(), learners);
  }
  for (int64_t p : state.positions) {
    if (p < 0) return absl::InvalidArgumentError("the shard's positions must be >= 0");
  }
  return std::unique_ptr<Shard>(new Shard(config, std::move(state), std::move(now)));
}

Shard::Shard(const ServerConfig& config, ServerState state, NowMsFn now)
    : config_(config), now_(std::move(now)) {
  const auto learners = static_cast<size_t>(config.num_slots);
  absl::MutexLock lock(&mu_);
  version_ = state.version;
  params_ = std::move(state.params);
  state_ = std::move(state.optimizer_state);
  taken_ = state.positions;
  applied_ = std::move(state.positions);
  seen_ms_.assign(learners, -1);
  done_.assign(learners, false);
  in_round_.assign(learners, false);
  if (config.consistency == Consistency::kBsp) round_sum_.assign(params_.size(), 0.0f);
}

absl::Status Shard::CheckLearner(int learner) const {
  if (learner < 0 || learner >= config_.num_slots) {
    return absl::InvalidArgumentError(absl::StrCat(
        "learner ", learner, " is out of range: the job has ", config_.num_slots, " learners"));
  }
  return absl::OkStatus();
}

bool Shard::LiveLocked(int learner, int64_t now) const {
  if (done_[learner]) return false;
  return seen_ms_[learner] < 0 || now - seen_ms_[learner] <= config_.lease_ms;
}

bool Shard::WithinStalenessLocked(int learner, int64_t seq, int64_t now) const {
  for (int l = 0; l < config_.num_slots; ++l) {
    if (l == learner || !LiveLocked(l, now)) continue;
    if (seq - 1 - taken_[l] > config_.staleness) return false;
  }
  return true;
}

void Shard::CountStalenessLocked(uint64_t base_version) {
  const uint64_t staleness = version_ > base_version ? version_ - base_version : 0;
  stats_.staleness[StalenessBucket(staleness)] += 1;
}

void Shard::ApplyLocked(const float* grad) {
  version_ += 1;
  ApplyUpdate(config_.optimizer, version_, grad, params_.data(), state_.data(), config_.num_params);
  stats_.version += 1;
}

void Shard::TryCompleteRoundLocked(int64_t now) {
  int in = 0;
  for (int l = 0; l < config_.num_slots; ++l) {
    if (in_round_[l]) {
      ++in;
    } else if (LiveLocked(l, now)) {
      return;  // a live learner's gradient is still to come
    }
  }
  if (in == 0) return;
  if (round_finite_ > 0) {
    Scale(round_sum_.data(), 1.0f / static_cast<float>(round_finite_), config_.num_params);
    ApplyLocked(round_sum_.data());
    stats_.gradients_applied += static_cast<uint64_t>(round_finite_);
  }
  std::fill(round_sum_.begin(), round_sum_.end(), 0.0f);
  for (int l = 0; l < config_.num_slots; ++l) {
    if (in_round_[l]) applied_[l] = taken_[l];
  }
  std::fill(in_round_.begin(), in_round_.end(), false);
  round_finite_ = 0;
  changed_.SignalAll();
}

bool Shard::ReadyLocked(Wait what, int learner, int64_t seq, int64_t now) const {
  return what == Wait::kApplied ? applied_[learner] >= seq
                                : WithinStalenessLocked(learner, seq, now);
}

bool Shard::WaitLocked(Wait what, int learner, int64_t seq, int64_t timeout_ms) {
  const int64_t deadline = now_() + timeout_ms;
  for (;;) {
    const int64_t now = now_();
    if (config_.consistency == Consistency::kBsp) TryCompleteRoundLocked(now);
    if (closed_ || ReadyLocked(what, learner, seq, now)) return true;
    if (now >= deadline) return false;
    changed_.WaitWithTimeout(&mu_, absl::Milliseconds(std::min(kWaitSliceMs, deadline - now)));
  }
}

absl::StatusOr<uint64_t> Shard::Pull(int learner, float* out, int64_t* applied) {
  if (absl::Status s = CheckLearner(learner); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (closed_) return absl::AbortedError("the parameter server is shut down");
  if (!done_[learner]) seen_ms_[learner] = now_();
  std::copy(params_.begin(), params_.end(), out);
  *applied = applied_[learner];
  return version_;
}

absl::StatusOr<PushResult> Shard::Push(int learner, int64_t seq, uint64_t base_version,
                                       const float* grad, bool non_finite, int64_t timeout_ms) {
  if (absl::Status s = CheckLearner(learner); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (closed_) return absl::AbortedError("the parameter server is shut down");
  seen_ms_[learner] = now_();
  done_[learner] = false;
  PushResult result;
  if (seq <= taken_[learner]) {  // a retry, or a resumed attempt's replay
    duplicates_ += 1;
    result.duplicate = true;
  } else if (seq != taken_[learner] + 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "push ", seq, " of learner ", learner, " skips ahead: the next is ", taken_[learner] + 1));
  } else {
    if (config_.consistency == Consistency::kSsp &&
        !WaitLocked(Wait::kWithinStaleness, learner, seq, timeout_ms)) {
      return absl::DeadlineExceededError(absl::StrCat(
          "push ", seq, " of learner ", learner, " is held back: a learner is more than ",
          config_.staleness, " gradients behind (ssp)"));
    }
    if (closed_) return absl::AbortedError("the parameter server is shut down");
    taken_[learner] = seq;
    changed_.SignalAll();
    result.discarded = non_finite || !AllFinite(grad, config_.num_params);
    if (result.discarded) stats_.discarded_non_finite += 1;
    if (config_.consistency != Consistency::kBsp) {
      if (!result.discarded) {
        CountStalenessLocked(base_version);
        ApplyLocked(grad);
        stats_.gradients_applied += 1;
      }
      applied_[learner] = seq;
    } else {
      if (!result.discarded) {
        CountStalenessLocked(base_version);
        AddInto(round_sum_.data(), grad, config_.num_params);
        round_finite_ += 1;
      }
      in_round_[learner] = true;
    }
  }
  if (!WaitLocked(Wait::kApplied, learner, seq, timeout_ms)) {
    return absl::DeadlineExceededError(absl::StrCat(
        "push ", seq, " of learner ", learner, " is taken; its bsp round is not complete yet"));
  }
  if (closed_ && applied_[learner] < seq)
    return absl::AbortedError("the parameter server is shut down");
  result.version = version_;
  return result;
}

absl::Status Shard::Done(int learner) {
  if (absl::Status s = CheckLearner(learner); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  done_[learner] = true;
  changed_.SignalAll();
  if (config_.consistency == Consistency::kBsp) TryCompleteRoundLocked(now_());
  return absl::OkStatus();
}

ServerState Shard::Snapshot(ApplierStats* stats, uint64_t* duplicates) {
  absl::MutexLock lock(&mu_);
  ServerState s;
  s.version = version_;
  s.params = params_;
  s.optimizer_state = state_;
  s.positions = applied_;
  if (stats != nullptr) *stats = stats_;
  if (duplicates != nullptr) *duplicates = duplicates_;
  return s;
}

std::vector<int64_t> Shard::Progress(uint64_t* version, ApplierStats* stats) {
  absl::MutexLock lock(&mu_);
  *version = version_;
  *stats = stats_;
  return applied_;
}

void Shard::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  changed_.SignalAll();
}

}  // namespace weft::ps
