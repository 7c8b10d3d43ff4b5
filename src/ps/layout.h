// The layout of one job attempt's parameter server in POSIX shared memory (GaDei's scale-up
// parameter server, Zhang et al., HPDC 2017): a header, the parameters, the optimizer state and
// one gradient slot per learner. Every field two processes share is here, once; the protocol that
// uses them is in shared_server.h / shared_client.h and docs/design.md ("The parameter server").
#pragma once

#include <atomic>
#include <cstdint>

#include "absl/status/status.h"

namespace weft::ps {

// How the applier turns gradients into versions (training.ps.consistency in the manifest).
//   kBsp: bulk-synchronous — one version per round, the average of one gradient from every live
//         learner;
//   kAsp: asynchronous — every gradient is a version of its own, applied as it arrives;
//   kSsp: stale-synchronous (Ho et al., NIPS 2013) — as kAsp, but a learner more than `staleness`
//         gradients ahead of the slowest live learner waits before it publishes.
enum class Consistency : uint32_t { kBsp = 0, kAsp = 1, kSsp = 2 };

enum class OptimizerKind : uint32_t { kSgd = 0, kAdam = 1 };

// The update rule, with torch.optim's meaning of each field (SGD without dampening or Nesterov;
// Adam with L2 weight decay, Kingma & Ba, ICLR 2015). Plain data: it lives in the segment.
struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::kSgd;
  double learning_rate = 0.01;
  double momentum = 0;  // sgd
  double weight_decay = 0;
  double beta1 = 0.9;  // adam
  double beta2 = 0.999;
  double eps = 1e-8;
};

struct ServerConfig {
  int num_slots = 1;       // learners, 1 to kMaxSlots; slot i belongs to the learner of rank i
  int64_t num_params = 0;  // float32 parameters, 1 to kMaxParams
  Consistency consistency = Consistency::kBsp;
  int64_t staleness = 0;  // kSsp: gradients a learner may run ahead of the slowest, 0 to 1e6
  OptimizerConfig optimizer;
  // A learner that has not called into its slot for this long (ms) is not waited for: a kBsp
  // round and the kSsp bound go on without it until it (or its replacement) is back.
  int64_t lease_ms = 10'000;
};

inline constexpr int kMaxSlots = 1024;
inline constexpr int64_t kMaxParams = int64_t{1} << 31;
// Staleness (versions between the one a gradient was computed on and the one it updates) is
// counted in buckets 0, 1, 2, 3-4, 5-8, 9-16, 17-32, 33 and more.
inline constexpr int kStalenessBuckets = 8;
int StalenessBucket(uint64_t staleness);

// InvalidArgument naming the field when `config` is out of range.
absl::Status ValidateServerConfig(const ServerConfig& config);

// Optimizer state floats per parameter: SGD 1 with momentum (the momentum buffer), else 0;
// Adam 2 (first and second moments).
int StateFloatsPerParam(const OptimizerConfig& config);

inline constexpr uint64_t kSegmentMagic = 0x3130535054464557ull;  // "WEFTPS01"
inline constexpr uint32_t kLayoutVersion = 2;

static_assert(std::atomic<uint64_t>::is_always_lock_free &&
                  std::atomic<int64_t>::is_always_lock_free,
              "the protocol shares atomics between processes: they must be lock-free");

// At offset 0 of the segment. The applier writes the configuration once, before any learner can
// attach (the segment is created under a name learners only learn afterwards).
struct alignas(64) SegmentHeader {
  std::atomic<uint64_t> magic;  // kSegmentMagic, stored (release) after everything else
  uint32_t layout_version;
  uint32_t num_slots;
  int64_t num_params;
  Consistency consistency;
  uint32_t reserved;
  int64_t staleness;
  int64_t lease_ms;
  OptimizerConfig optimizer;
  uint64_t params_offset;  // bytes from the segment's start: float[num_params]
  uint64_t state_offset;   // float[num_params * StateFloatsPerParam]
  uint64_t slots_offset;   // num_slots × slot_stride bytes: SlotHeader, then float[num_params]
  uint64_t slot_stride;
  // The parameters' seqlock: odd while the applier writes them. Only the applier writes it.
  alignas(64) std::atomic<uint64_t> param_seq;
  // Versions applied so far (updates of the parameters); changes only inside the seqlock.
  std::atomic<uint64_t> version;
  std::atomic<uint32_t> closed;  // 1 once the applier has shut the server down
  // Metrics, written by the applier only.
  alignas(64) std::atomic<uint64_t> gradients_applied;
  std::atomic<uint64_t> discarded_non_finite;
  std::atomic<uint64_t> staleness_buckets[kStalenessBuckets];
};

// One learner's gradient slot; its gradient (float[num_params]) follows at offset
// kSlotHeaderBytes. The slot is FREE when published == applied (its learner may write the
// gradient) and FULL when published == applied + 1 (the applier owns it): the learner writes
// `published`, the applier `applied`, each only ever upwards by one.
struct alignas(64) SlotHeader {
  std::atomic<uint64_t> published;      // sequence number of the last gradient fully written
  std::atomic<uint64_t> applied;        // sequence number of the last gradient applied or discarded
  std::atomic<uint64_t> base_version;   // version the published gradient was computed on
  std::atomic<int64_t> lease_until_ms;  // CLOCK_MONOTONIC ms; 0: detached
  std::atomic<uint64_t> owner;          // bumped by every Attach: a replaced learner's handle
  // 1 when the published gradient holds a NaN or an infinity (its learner checked as it copied;
  // a learner that lied would only spoil its own job, whose gradients it writes anyway).
  std::atomic<uint32_t> non_finite;
  // Batches of its learner's data trained before this segment was created (a resumed job's, from
  // its checkpoint); written once, before the magic. The learner's next batch is
  // start_position + published: every gradient is one batch, in order.
  int64_t start_position;
};

inline constexpr uint64_t kSlotHeaderBytes = 64;
static_assert(sizeof(SlotHeader) <= kSlotHeaderBytes);

// Byte offsets of a server's regions and its total size.
struct Layout {
  uint64_t params_offset = 0;
  uint64_t state_offset = 0;
  uint64_t slots_offset = 0;
  uint64_t slot_stride = 0;
  uint64_t total_bytes = 0;
};
// `config` must be valid (ValidateServerConfig).
Layout LayoutFor(const ServerConfig& config);

}  // namespace weft::ps
