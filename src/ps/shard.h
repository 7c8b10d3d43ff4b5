// One shard of a job's scale-out parameter server (issue 15): a contiguous key range of the
// job's flat parameters with its optimizer state, held by one weft-ps process and reached over
// gRPC (shard_service.h). It applies each learner's pushes in sequence, each exactly once: a push
// carries (learner, seq), seq being the learner's data position + 1, and one whose seq was taken
// before is acknowledged as a duplicate and not applied again (ps-lite's resender, Li et al.,
// OSDI 2014). The consistency modes are the scale-up server's (layout.h). The argument is in
// docs/design.md ("Scale-out").
//
// Thread-safety: every method may be called from any thread (gRPC's); waits hold no lock.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "ps/layout.h"
#include "ps/protocol.h"
#include "ps/shared_server.h"

namespace weft::ps {

// The DNS name a job attempt's shard certificate is issued to (weftd), and the one its learners
// check it against whatever address they dial (remote_client.h).
inline constexpr char kPsTlsName[] = "weft-ps";

// The key range of shard `index` of `shards` over `num_params` parameters: contiguous, in order,
// sizes differing by at most one. Requires 1 <= shards <= num_params.
struct KeyRange {
  int64_t begin = 0;
  int64_t end = 0;  // exclusive
  int64_t size() const { return end - begin; }
};
KeyRange ShardRange(int64_t num_params, int shards, int index);

struct PushResult {
  uint64_t version = 0;    // the shard's version after the push was taken
  bool duplicate = false;  // taken before: not applied again
  bool discarded = false;  // non-finite: counted as applied, changes nothing
};

class Shard {
 public:
  // A shard of config.num_params parameters (this range's) for config.num_slots learners, from
  // `state` (its params are required; optimizer state and positions may be empty: zeros). A
  // learner's position is the last seq applied. InvalidArgument for a bad config (the field
  // named) or sizes that do not match it.
  static absl::StatusOr<std::unique_ptr<Shard>> Create(const ServerConfig& config,
                                                       ServerState state,
                                                       NowMsFn now = MonotonicMs);

  // Copies the parameters into out[num_params()] and returns their version; *applied is
  // `learner`'s last applied seq. InvalidArgument for a learner out of range; Aborted once
  // closed.
  absl::StatusOr<uint64_t> Pull(int learner, float* out, int64_t* applied);
  // Takes gradient `seq` of `learner` (grad[num_params()], computed on `base_version`), and
  // returns once it is applied (kBsp: once its round is). seq <= the learner's last taken seq:
  // a duplicate, acknowledged without applying (waiting, under kBsp, until its round is
  // applied). FailedPrecondition for a gap (seq past the next one); DeadlineExceeded after
  // `timeout_ms` (ms) when kSsp holds the push back (nothing taken) or its kBsp round is not
  // complete (taken: push it again); Aborted once closed. A non-finite gradient, or one
  // flagged `non_finite` by the learner (which checked the whole of it), is discarded: its seq
  // counts as applied and nothing changes.
  absl::StatusOr<PushResult> Push(int learner, int64_t seq, uint64_t base_version,
                                  const float* grad, bool non_finite, int64_t timeout_ms);
  // `learner` pushes no more: kBsp rounds and the kSsp bound stop waiting for it.
  absl::Status Done(int learner);
  // The training state (positions: each learner's last applied seq) and the counters.
  ServerState Snapshot(ApplierStats* stats, uint64_t* duplicates);
  // Each learner's last applied seq, the version and the counters (no copy of the floats).
  std::vector<int64_t> Progress(uint64_t* version, ApplierStats* stats);
  // Every wait returns Aborted, and every later call.
  void Close();

  int64_t num_params() const { return config_.num_params; }
  int learners() const { return config_.num_slots; }

 private:
  Shard(const ServerConfig& config, ServerState state, NowMsFn now);
  absl::Status CheckLearner(int learner) const;
  bool LiveLocked(int learner, int64_t now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // kSsp: no live learner is more than `staleness` taken gradients behind `seq`.
  bool WithinStalenessLocked(int learner, int64_t seq, int64_t now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One version from grad (already averaged).
  void ApplyLocked(const float* grad) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CountStalenessLocked(uint64_t base_version) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // kBsp: applies the round when every live learner's gradient is in.
  void TryCompleteRoundLocked(int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What a push waits for: its seq applied, or (kSsp) room within the staleness bound.
  enum class Wait { kApplied, kWithinStaleness };
  bool ReadyLocked(Wait what, int learner, int64_t seq, int64_t now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits in slices (so that expired leases are seen) until ready, closed or the deadline; false
  // on timeout. Re-checks kBsp rounds on every wake.
  bool WaitLocked(Wait what, int learner, int64_t seq, int64_t timeout_ms)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ServerConfig config_;
  const NowMsFn now_;
  absl::Mutex mu_;
  absl::CondVar changed_;  // signalled on every change a wait may be waiting for
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<float> params_ ABSL_GUARDED_BY(mu_);
  std::vector<float> state_ ABSL_GUARDED_BY(mu_);
  // Per learner: last seq taken, last seq applied (they differ only within a kBsp round), when
  // last heard from (-1: never, which counts as live), done.
  std::vector<int64_t> taken_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> applied_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> seen_ms_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> done_ ABSL_GUARDED_BY(mu_);
  // kBsp: the round's gradients summed, who is in it, and how many were finite.
  std::vector<float> round_sum_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> in_round_ ABSL_GUARDED_BY(mu_);
  int round_finite_ ABSL_GUARDED_BY(mu_) = 0;
  ApplierStats stats_ ABSL_GUARDED_BY(mu_);
  uint64_t duplicates_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace weft::ps
