// What the applier (shared_server.h) and the learners (shared_client.h) both use to read a
// parameter-server segment: typed views of its regions, the monotonic clock the slot leases are
// written in, and the backoff every wait uses. Internal to weft::ps.
#pragma once

#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"
#include "ps/layout.h"
#include "ps/segment.h"

namespace weft::ps {

// Milliseconds of CLOCK_MONOTONIC: one clock for every process on the node, so a lease one
// process writes is comparable with the time another reads. Tests pass their own.
using NowMsFn = std::function<int64_t()>;
int64_t MonotonicMs();

// Typed pointers into a mapped segment.
class SegmentView {
 public:
  // Checks the header (magic, layout version, sizes against the mapping) and returns a view.
  // FailedPrecondition when the segment is not a parameter server of this layout.
  static absl::StatusOr<SegmentView> Of(const SharedSegment& segment);
  // A view of a segment whose header the caller has just written (the server).
  static SegmentView Unchecked(void* data);

  SegmentHeader& header() const { return *header_; }
  float* params() const { return base() + header_->params_offset / sizeof(float); }
  float* state() const { return base() + header_->state_offset / sizeof(float); }
  SlotHeader& slot(int i) const {
    return *reinterpret_cast<SlotHeader*>(reinterpret_cast<char*>(header_) + SlotOffset(i));
  }
  float* gradient(int i) const {
    return base() + (SlotOffset(i) + kSlotHeaderBytes) / sizeof(float);
  }
  int num_slots() const { return static_cast<int>(header_->num_slots); }
  int64_t num_params() const { return header_->num_params; }

 private:
  explicit SegmentView(SegmentHeader* header) : header_(header) {}
  float* base() const { return reinterpret_cast<float*>(header_); }
  uint64_t SlotOffset(int i) const {
    return header_->slots_offset + header_->slot_stride * static_cast<uint64_t>(i);
  }
  SegmentHeader* header_;
};

// True when the slot's learner has called into it within its lease, or none has attached to it
// yet: a learner still starting is waited for (a kBsp round, the kSsp bound), one that came and
// went silent for a lease is not.
inline bool SlotIsLive(const SlotHeader& slot, int64_t now_ms) {
  return slot.owner.load(std::memory_order_acquire) == 0 ||
         slot.lease_until_ms.load(std::memory_order_acquire) >= now_ms;
}

// Spins, then yields, then sleeps in growing steps up to 200 µs: a wait that costs nothing while
// the other side is quick and little CPU while it is not (2 cores may hold 3 busy threads).
class Backoff {
 public:
  void Pause();
  void Reset() { rounds_ = 0; }

 private:
  int rounds_ = 0;
};

// Copies `n` floats out of the seqlock-protected parameters. The copy may overlap the applier's
// write (the seqlock's reader retries then); under ThreadSanitizer the overlap is declared, as
// every seqlock's reader does, so only real races are reported.
void SeqlockCopy(float* out, const float* params, int64_t n);

}  // namespace weft::ps
