// Leader election among the weftd that share one store (docs/deploy.md, "Two weftd in
// active/standby"). One of them leads — schedules, runs the coordinator, answers the REST API —
// while the others stand by. The leader holds a lease with a fencing epoch: a takeover raises
// the epoch, and once a store is fenced at an epoch it refuses every write made after the
// epoch moved on, so a deposed leader (paused, cut off, or slow to notice) cannot change
// anything the new leader reads.
//
// Times are the store server's clock, never a weftd host's: two hosts' clocks need not agree.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace weft {

// A weftd that shares the store: its name (unique among them; weftd --name) and the addresses
// clients and learners reach it at.
struct Member {
  std::string name;
  std::string api;          // the REST API, scheme://host:port
  std::string coordinator;  // the coordinator's gRPC host:port
};

// The lease as a campaign left it.
struct Lease {
  bool held = false;   // by the member that campaigned
  int64_t epoch = 0;   // the leader's fencing epoch (0: nobody ever led)
  Member leader;       // the holder (name "" when the lease is free or expired)
  Member last_holder;  // who held the lease before this campaign, expired or not ("": nobody)
  int64_t expires_in_ms = 0;    // until the holder's lease runs out (<= 0: it has)
  std::vector<Member> members;  // every member seen in the last kMemberFreshMs, by name
};

class Leadership {
 public:
  // Members not seen for this long are left out of Lease::members (and so of learners'
  // coordinator lists).
  static constexpr int64_t kMemberFreshMs = 60'000;

  virtual ~Leadership() = default;

  // Records `me` as seen now, then, atomically:
  //   - `held_epoch` is the current epoch and `me` holds it: renews the lease for `ttl_ms`;
  //   - the lease is free, expired, or held under `me.name` by an earlier process (held_epoch
  //     0 — a weftd restarted under its name takes its place at once): takes it, with the
  //     epoch raised by one, for `ttl_ms`;
  //   - otherwise leaves it: held is false, and `leader` says who holds it. A leader that gets
  //     this was deposed.
  // A campaign that stalls in the middle for longer than `ttl_ms` is ended by the store and
  // fails (as Fence's writes do).
  // Unavailable if the store cannot be reached; the lease is then neither taken nor renewed.
  virtual absl::StatusOr<Lease> Campaign(const Member& me, int64_t held_epoch, int64_t ttl_ms) = 0;

  // From now on every write first checks that the store's epoch is still `epoch`; one that finds
  // a later epoch is refused (FailedPrecondition, nothing written) and `on_deposed(epoch now)`
  // runs, once, on the thread that tried. A write that stalls in the middle for longer than
  // `ttl_ms` (the lease's; a paused process) is ended by the store, its locks released, and
  // fails: a paused leader cannot hold up its successor. Call when Campaign took the lease,
  // before acting on it.
  virtual void Fence(int64_t epoch, int64_t ttl_ms, std::function<void(int64_t)> on_deposed) = 0;
};

}  // namespace weft
