#include "ps/shared_server.h"

#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps/update.h"

namespace weft::ps {
namespace {

constexpr auto kRelaxed = std::memory_order_relaxed;
constexpr auto kAcquire = std::memory_order_acquire;
constexpr auto kRelease = std::memory_order_release;

void WriteHeader(void* data, const ServerConfig& config, const Layout& layout) {
  auto* header = new (data) SegmentHeader();
  header->layout_version = kLayoutVersion;
  header->num_slots = static_cast<uint32_t>(config.num_slots);
  header->num_params = config.num_params;
  header->consistency = config.consistency;
  header->staleness = config.staleness;
  header->lease_ms = config.lease_ms;
  header->optimizer = config.optimizer;
  header->params_offset = layout.params_offset;
  header->state_offset = layout.state_offset;
  header->slots_offset = layout.slots_offset;
  header->slot_stride = layout.slot_stride;
  for (int i = 0; i < config.num_slots; ++i) {
    new (static_cast<char*>(data) + layout.slots_offset + layout.slot_stride * i) SlotHeader();
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<SharedParameterServer>> SharedParameterServer::Create(
    const std::string& name, const ServerConfig& config, const float* initial_params, NowMsFn now) {
  return CreateFrom(name, config, initial_params, nullptr, std::move(now));
}

absl::StatusOr<std::unique_ptr<SharedParameterServer>> SharedParameterServer::Create(
    const std::string& name, const ServerConfig& config, const ServerState& state, NowMsFn now) {
  const auto n = static_cast<size_t>(config.num_params);
  auto mismatch = [](const char* what, size_t got, size_t want) {
    return absl::InvalidArgumentError(absl::StrCat("the server state's ", what, " has ", got,
                                                   " entries; the server needs ", want));
  };
  if (state.params.size() != n) return mismatch("parameters", state.params.size(), n);
  const size_t state_floats = n * static_cast<size_t>(StateFloatsPerParam(config.optimizer));
  if (!state.optimizer_state.empty() && state.optimizer_state.size() != state_floats) {
    return mismatch("optimizer state", state.optimizer_state.size(), state_floats);
  }
  const auto slots = static_cast<size_t>(config.num_slots);
  if (!state.positions.empty() && state.positions.size() != slots) {
    return mismatch("positions", state.positions.size(), slots);
  }
  return CreateFrom(name, config, state.params.data(), &state, std::move(now));
}

absl::StatusOr<std::unique_ptr<SharedParameterServer>> SharedParameterServer::CreateFrom(
    const std::string& name, const ServerConfig& config, const float* params,
    const ServerState* state, NowMsFn now) {
  RETURN_IF_ERROR(ValidateServerConfig(config));
  const Layout layout = LayoutFor(config);
  ASSIGN_OR_RETURN(SharedSegment segment, SharedSegment::Create(name, layout.total_bytes));
  WriteHeader(segment.data(), config, layout);
  SegmentView view = SegmentView::Unchecked(segment.data());
  std::memcpy(view.params(), params, static_cast<size_t>(config.num_params) * sizeof(float));
  if (state != nullptr) {
    // A fresh mapping is zeros: only what the state holds is copied.
    if (!state->optimizer_state.empty()) {
      std::memcpy(view.state(), state->optimizer_state.data(),
                  state->optimizer_state.size() * sizeof(float));
    }
    view.header().version.store(state->version, kRelaxed);
    for (size_t i = 0; i < state->positions.size(); ++i) {
      view.slot(static_cast<int>(i)).start_position = state->positions[i];
    }
  }
  // Learners check the magic (acquire) before they read anything else.
  view.header().magic.store(kSegmentMagic, kRelease);
  return std::unique_ptr<SharedParameterServer>(
      new SharedParameterServer(std::move(segment), std::move(now)));
}

SharedParameterServer::SharedParameterServer(SharedSegment segment, NowMsFn now)
    : segment_(std::move(segment)),
      view_(SegmentView::Unchecked(segment_.data())),
      now_(std::move(now)) {
  ready_.reserve(view_.num_slots());
}

SharedParameterServer::~SharedParameterServer() {
  view_.header().closed.store(1, kRelease);
  (void)SharedSegment::Unlink(segment_.name());
}

int SharedParameterServer::ApplyReady() {
  return view_.header().consistency == Consistency::kBsp ? ApplyRound() : ApplyEach();
}

void SharedParameterServer::Run(const std::atomic<bool>& stop) {
  Backoff backoff;
  while (!stop.load(kAcquire)) {
    if (snapshot_wanted_.load(kAcquire)) {
      ServerState state = Snapshot();
      absl::MutexLock lock(&snapshot_mu_);
      snapshot_ = std::move(state);
      snapshot_ready_ = true;
      snapshot_wanted_.store(false, kRelease);
    }
    if (ApplyReady() > 0) {
      backoff.Reset();
    } else {
      backoff.Pause();
    }
  }
}

int SharedParameterServer::ApplyEach() {
  int taken = 0;
  for (int i = 0; i < view_.num_slots(); ++i) {
    SlotHeader& slot = view_.slot(i);
    if (slot.published.load(kAcquire) == slot.applied.load(kRelaxed)) continue;
    ++taken;
    if (slot.non_finite.load(kRelaxed) != 0) {
      Discard(i);
      continue;
    }
    ApplyVersion(view_.gradient(i), &i, 1);
  }
  return taken;
}

int SharedParameterServer::ApplyRound() {
  const int64_t now = now_();
  ready_.clear();
  for (int i = 0; i < view_.num_slots(); ++i) {
    SlotHeader& slot = view_.slot(i);
    if (slot.published.load(kAcquire) != slot.applied.load(kRelaxed)) {
      ready_.push_back(i);
    } else if (SlotIsLive(slot, now)) {
      return 0;  // a live learner has not published this round's gradient yet
    }
  }
  int taken = static_cast<int>(ready_.size());
  const int64_t n = view_.num_params();
  size_t kept = 0;
  for (int slot : ready_) {
    if (view_.slot(slot).non_finite.load(kRelaxed) == 0) {
      ready_[kept++] = slot;
    } else {
      Discard(slot);
    }
  }
  ready_.resize(kept);
  if (ready_.empty()) return taken;
  if (ready_.size() == 1) {
    ApplyVersion(view_.gradient(ready_[0]), ready_.data(), 1);
    return taken;
  }
  sum_.assign(view_.gradient(ready_[0]), view_.gradient(ready_[0]) + n);
  for (size_t k = 1; k < ready_.size(); ++k) AddInto(sum_.data(), view_.gradient(ready_[k]), n);
  Scale(sum_.data(), 1.0f / static_cast<float>(ready_.size()), n);
  ApplyVersion(sum_.data(), ready_.data(), static_cast<int>(ready_.size()));
  return taken;
}

void SharedParameterServer::ApplyVersion(const float* grad, const int* slots, int count) {
  SegmentHeader& header = view_.header();
  const uint64_t version = header.version.load(kRelaxed);
  for (int k = 0; k < count; ++k) {
    uint64_t base = view_.slot(slots[k]).base_version.load(kRelaxed);
    uint64_t staleness = base < version ? version - base : 0;
    header.staleness_buckets[StalenessBucket(staleness)].fetch_add(1, kRelaxed);
  }
  // The seqlock's write side (Boehm, "Can seqlocks get along with programming language memory
  // models?", MSPC 2012): odd, fence, the writes, even with release.
  const uint64_t seq = header.param_seq.load(kRelaxed);
  header.param_seq.store(seq + 1, kRelaxed);
  std::atomic_thread_fence(kRelease);
  ApplyUpdate(header.optimizer, version + 1, grad, view_.params(), view_.state(),
              view_.num_params());
  header.version.store(version + 1, kRelaxed);
  header.param_seq.store(seq + 2, kRelease);
  header.gradients_applied.fetch_add(static_cast<uint64_t>(count), kRelaxed);
  // Only now, with the gradient read, do the slots go back to their learners.
  for (int k = 0; k < count; ++k) {
    SlotHeader& slot = view_.slot(slots[k]);
    slot.applied.store(slot.applied.load(kRelaxed) + 1, kRelease);
  }
}

void SharedParameterServer::Discard(int i) {
  view_.header().discarded_non_finite.fetch_add(1, kRelaxed);
  SlotHeader& slot = view_.slot(i);
  slot.applied.store(slot.applied.load(kRelaxed) + 1, kRelease);
}

ApplierStats SharedParameterServer::Stats() const {
  const SegmentHeader& header = view_.header();
  ApplierStats stats;
  stats.version = header.version.load(kAcquire);
  stats.gradients_applied = header.gradients_applied.load(kRelaxed);
  stats.discarded_non_finite = header.discarded_non_finite.load(kRelaxed);
  for (int b = 0; b < kStalenessBuckets; ++b) {
    stats.staleness[b] = header.staleness_buckets[b].load(kRelaxed);
  }
  return stats;
}

std::vector<int64_t> SharedParameterServer::Positions() const {
  std::vector<int64_t> positions(static_cast<size_t>(view_.num_slots()));
  for (int i = 0; i < view_.num_slots(); ++i) {
    const SlotHeader& slot = view_.slot(i);
    positions[i] = slot.start_position + static_cast<int64_t>(slot.applied.load(kAcquire));
  }
  return positions;
}

ServerState SharedParameterServer::Snapshot() const {
  ServerState state;
  state.version = view_.header().version.load(kRelaxed);
  const auto n = static_cast<size_t>(view_.num_params());
  state.params.assign(view_.params(), view_.params() + n);
  const size_t state_floats =
      n * static_cast<size_t>(StateFloatsPerParam(view_.header().optimizer));
  state.optimizer_state.assign(view_.state(), view_.state() + state_floats);
  state.positions = Positions();
  return state;
}

ServerState SharedParameterServer::TakeSnapshot() {
  absl::MutexLock lock(&snapshot_mu_);
  snapshot_ready_ = false;
  snapshot_wanted_.store(true, kRelease);
  snapshot_mu_.Await(absl::Condition(&snapshot_ready_));
  snapshot_ready_ = false;
  return std::move(snapshot_);
}

void SharedParameterServer::CopyParams(float* out) const {
  std::memcpy(out, view_.params(), static_cast<size_t>(view_.num_params()) * sizeof(float));
}

}  // namespace weft::ps
