#include "ps/layout.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace weft::ps {
namespace {

uint64_t RoundUp(uint64_t bytes) { return (bytes + 63) / 64 * 64; }

bool FiniteIn(double v, double lo, double hi) { return std::isfinite(v) && v >= lo && v <= hi; }

}  // namespace

int StalenessBucket(uint64_t staleness) {
  if (staleness <= 2) return static_cast<int>(staleness);
  int bucket = 3;
  for (uint64_t upper = 4; bucket < kStalenessBuckets - 1 && staleness > upper; upper *= 2) {
    ++bucket;
  }
  return bucket;
}

int StateFloatsPerParam(const OptimizerConfig& config) {
  if (config.kind == OptimizerKind::kAdam) return 2;
  return config.momentum != 0 ? 1 : 0;
}

absl::Status ValidateServerConfig(const ServerConfig& config) {
  if (config.num_slots < 1 || config.num_slots > kMaxSlots) {
    return absl::InvalidArgumentError(absl::StrCat("num_slots: must be 1 to ", kMaxSlots));
  }
  if (config.num_params < 1 || config.num_params > kMaxParams) {
    return absl::InvalidArgumentError(absl::StrCat("num_params: must be 1 to ", kMaxParams));
  }
  if (config.consistency != Consistency::kBsp && config.consistency != Consistency::kAsp &&
      config.consistency != Consistency::kSsp) {
    return absl::InvalidArgumentError("consistency: must be bsp, asp or ssp");
  }
  if (config.staleness < 0 || config.staleness > 1'000'000) {
    return absl::InvalidArgumentError("staleness: must be 0 to 1000000");
  }
  if (config.lease_ms < 1) return absl::InvalidArgumentError("lease_ms: must be positive");
  const OptimizerConfig& o = config.optimizer;
  if (o.kind != OptimizerKind::kSgd && o.kind != OptimizerKind::kAdam) {
    return absl::InvalidArgumentError("optimizer: must be sgd or adam");
  }
  if (!FiniteIn(o.learning_rate, 0, 1e6) || o.learning_rate == 0) {
    return absl::InvalidArgumentError("learning_rate: must be positive and finite");
  }
  if (!FiniteIn(o.momentum, 0, 1) || !FiniteIn(o.weight_decay, 0, 1e6) ||
      !FiniteIn(o.beta1, 0, 1) || !FiniteIn(o.beta2, 0, 1) || o.beta1 == 1 || o.beta2 == 1 ||
      !FiniteIn(o.eps, 0, 1)) {
    return absl::InvalidArgumentError(
        "optimizer: momentum and betas in [0, 1), weight_decay >= 0, eps in [0, 1]");
  }
  return absl::OkStatus();
}

Layout LayoutFor(const ServerConfig& config) {
  const uint64_t param_bytes = static_cast<uint64_t>(config.num_params) * sizeof(float);
  Layout layout;
  layout.params_offset = RoundUp(sizeof(SegmentHeader));
  layout.state_offset = layout.params_offset + RoundUp(param_bytes);
  layout.slots_offset =
      layout.state_offset + RoundUp(param_bytes * StateFloatsPerParam(config.optimizer));
  layout.slot_stride = kSlotHeaderBytes + RoundUp(param_bytes);
  layout.total_bytes = layout.slots_offset + layout.slot_stride * config.num_slots;
  return layout;
}

}  // namespace weft::ps
