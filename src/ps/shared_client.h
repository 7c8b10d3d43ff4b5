// A learner's side of the scale-up parameter server (shared_server.h): it attaches to its slot in
// the job attempt's segment, pulls consistent copies of the parameters and publishes one gradient
// at a time. Every wait has a deadline, and none holds a lock. The protocol is in docs/design.md
// ("The parameter server").
//
// Thread-safety: one thread per client; a slot has one client at a time (a replacement's Attach
// takes the slot over, and the replaced client's next call returns Aborted).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "ps/protocol.h"
#include "ps/segment.h"

namespace weft::ps {

// The places a learner can die inside the protocol, for the fault-injection tests: a KillHook
// that returns true at one of them makes the client stop right there, as if SIGKILLed, leaving
// the segment exactly as it is (its later calls return Aborted).
enum class KillPoint {
  kPullMidCopy,           // half the parameters copied
  kPublishBeforeWrite,    // slot free, nothing written
  kPublishMidWrite,       // half the gradient written
  kPublishBeforeRelease,  // gradient and base version written, `published` not yet advanced
  kPublishAfterRelease,   // published, before returning to the caller
  kWaitApplied,           // while waiting for the applier
};
using KillHook = std::function<bool(KillPoint)>;

class SharedPsClient {
 public:
  // Attaches to slot `slot` (the learner's rank) of segment `name`, taking it over from any
  // earlier learner of that slot, and renews its lease. The next gradient's sequence number goes
  // on from the slot's (a replacement resumes its predecessor's sequence). NotFound when there
  // is no segment yet, Unavailable while its server is still writing it (try again, as for
  // NotFound); FailedPrecondition when it is not a parameter server of this layout or is
  // closed; InvalidArgument when `slot` is out of range; the errors of SharedSegment::Open.
  static absl::StatusOr<std::unique_ptr<SharedPsClient>> Attach(const std::string& name, int slot,
                                                                NowMsFn now = MonotonicMs);
  // Gives the slot up: kBsp rounds and the kSsp bound stop waiting for it.
  ~SharedPsClient();
  SharedPsClient(const SharedPsClient&) = delete;
  SharedPsClient& operator=(const SharedPsClient&) = delete;

  // Copies a consistent snapshot of the parameters into out[num_params()] and returns its
  // version. DeadlineExceeded when no consistent copy could be taken in `timeout_ms` (the applier
  // wrote throughout, or died writing); Unavailable when the server is closed; Aborted when the
  // slot was taken over or a kill hook fired.
  absl::StatusOr<uint64_t> Pull(float* out, int64_t timeout_ms);
  // Publishes grad[num_params()], computed on the parameters of `base_version`, as the slot's
  // next gradient and returns its sequence number (1, 2, ...). Waits first until the slot is
  // FREE (its previous gradient applied) and, under kSsp, until no live learner is more than
  // `staleness` gradients behind this one. A gradient holding a NaN or an infinity is published
  // flagged, and the applier discards it. Errors as Pull.
  absl::StatusOr<uint64_t> Publish(const float* grad, uint64_t base_version, int64_t timeout_ms);
  // Waits until gradient `seq` of this slot is applied (or discarded). Errors as Pull.
  absl::Status WaitApplied(uint64_t seq, int64_t timeout_ms);

  // This learner publishes no more gradients (its share is trained): kBsp rounds and the kSsp
  // bound stop waiting for the slot at once, and its later pulls do not make it live again.
  void Done();

  int64_t num_params() const { return view_.num_params(); }
  int slot() const { return slot_; }
  // The slot's counters: gradients published / applied or discarded so far.
  uint64_t published() const;
  uint64_t applied() const;
  // Batches of this slot's data trained before the segment was created (SlotHeader).
  int64_t start_position() const { return slot_header_.start_position; }
  void set_kill_hook(KillHook hook) { kill_hook_ = std::move(hook); }

 private:
  SharedPsClient(SharedSegment segment, SegmentView view, int slot, uint64_t owner, NowMsFn now);
  // Renews the lease; Aborted if the slot changed hands or the client was killed, Unavailable
  // if the server is closed.
  absl::Status Check();
  bool Killed(KillPoint point);
  // kSsp: true when no live learner is more than `staleness` gradients behind `seq`.
  bool WithinStaleness(uint64_t seq, int64_t now) const;
  absl::Status WaitUntil(const std::function<bool(int64_t now)>& ready, int64_t timeout_ms,
                         const char* what);

  SharedSegment segment_;
  SegmentView view_;
  SlotHeader& slot_header_;
  int slot_;
  uint64_t owner_;
  NowMsFn now_;
  KillHook kill_hook_;
  bool killed_ = false;
  bool done_ = false;  // Done(): calls no longer renew the lease
};

}  // namespace weft::ps
