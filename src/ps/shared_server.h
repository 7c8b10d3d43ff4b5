// The applier of a job attempt's scale-up parameter server (GaDei, Zhang et al., HPDC 2017):
// it owns the segment in POSIX shared memory that holds the parameters, the optimizer state and
// one gradient slot per learner, and applies every published gradient exactly once. The protocol
// and its exactly-once and deadlock-freedom argument are in docs/design.md ("The parameter
// server"); the learner's side is shared_client.h.
//
// Thread-safety: one thread calls ApplyReady/Run (the applier); Stats and the accessors may be
// called from any thread. The applier never waits for a learner and holds no lock.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "ps/layout.h"
#include "ps/protocol.h"
#include "ps/segment.h"

namespace weft::ps {

// The server's training state, as a checkpoint holds it and a resumed server starts from.
struct ServerState {
  uint64_t version = 0;       // versions applied (Adam's step count goes on from it)
  std::vector<float> params;  // [num_params]
  // [num_params × StateFloatsPerParam]: SGD's momentum buffer, or Adam's first moments then
  // second moments; empty: zeros.
  std::vector<float> optimizer_state;
  // Per slot, batches of its learner's data whose gradients were applied or discarded:
  // start_position + applied. Empty: zeros.
  std::vector<int64_t> positions;
};

// What the applier has done since the segment was created.
struct ApplierStats {
  uint64_t version = 0;            // versions applied (parameter updates)
  uint64_t gradients_applied = 0;  // gradients that went into a version
  uint64_t discarded_non_finite = 0;
  // gradients by staleness (versions between the one computed on and the one updated), in the
  // buckets of StalenessBucket: 0, 1, 2, 3-4, 5-8, 9-16, 17-32, 33+.
  std::array<uint64_t, kStalenessBuckets> staleness{};
};

class SharedParameterServer {
 public:
  // Creates segment `name` (SegmentNameForJob) for `config`, with the parameters
  // initial_params[config.num_params] and zero optimizer state. InvalidArgument for a bad config
  // (the field named); AlreadyExists when the segment exists (another attempt's, not yet
  // removed); the errors of SharedSegment::Create.
  static absl::StatusOr<std::unique_ptr<SharedParameterServer>> Create(const std::string& name,
                                                                       const ServerConfig& config,
                                                                       const float* initial_params,
                                                                       NowMsFn now = MonotonicMs);
  // As above, resumed from `state` (a checkpoint's): its parameters, optimizer state, version,
  // and each slot's position as its start_position. InvalidArgument when a size does not match
  // `config`.
  static absl::StatusOr<std::unique_ptr<SharedParameterServer>> Create(const std::string& name,
                                                                       const ServerConfig& config,
                                                                       const ServerState& state,
                                                                       NowMsFn now = MonotonicMs);
  // Marks the server closed (learners' waits return Unavailable) and removes its name.
  ~SharedParameterServer();
  SharedParameterServer(const SharedParameterServer&) = delete;
  SharedParameterServer& operator=(const SharedParameterServer&) = delete;

  // One pass over the slots; never blocks. kAsp/kSsp apply every FULL slot's gradient as a
  // version of its own, in slot order; kBsp applies one version, the average of every FULL slot's
  // gradient, once no live slot is FREE. A gradient with a NaN or an infinity (flagged by its
  // learner as it published it) is discarded (its slot freed, the discard counted) and never
  // applied. Returns the gradients taken.
  int ApplyReady();
  // Calls ApplyReady until `stop` is true, backing off while nothing is ready.
  void Run(const std::atomic<bool>& stop);

  ApplierStats Stats() const;
  // Each slot's position (ServerState::positions) now; any thread.
  std::vector<int64_t> Positions() const;
  // The state between two passes, for a checkpoint: on the applier's thread, or from another
  // while Run runs (it hands the state over after its current pass; call it only then).
  ServerState Snapshot() const;
  ServerState TakeSnapshot();
  // Copies the parameters into out[num_params]; call on the applier's thread (a checkpoint).
  void CopyParams(float* out) const;
  int64_t num_params() const { return view_.num_params(); }
  const std::string& name() const { return segment_.name(); }

 private:
  SharedParameterServer(SharedSegment segment, NowMsFn now);
  static absl::StatusOr<std::unique_ptr<SharedParameterServer>> CreateFrom(
      const std::string& name, const ServerConfig& config, const float* params,
      const ServerState* state, NowMsFn now);
  // Applies `grad` as the next version and frees slots[0..count) (their gradients are in it).
  void ApplyVersion(const float* grad, const int* slots, int count);
  void Discard(int slot);
  int ApplyEach();
  int ApplyRound();

  SharedSegment segment_;
  SegmentView view_;
  NowMsFn now_;
  std::vector<float> sum_;  // kBsp: the round's averaged gradient
  std::vector<int> ready_;  // slots taken by the current pass
  // TakeSnapshot's hand-over from Run's thread.
  std::atomic<bool> snapshot_wanted_{false};
  absl::Mutex snapshot_mu_;
  bool snapshot_ready_ ABSL_GUARDED_BY(snapshot_mu_) = false;
  ServerState snapshot_ ABSL_GUARDED_BY(snapshot_mu_);
};

}  // namespace weft::ps
