// A learner's side of the scale-out parameter server: the job's flat parameters are cut into K
// key ranges (ShardRange), one per weft-ps server; a pull gathers every range, a push scatters
// the gradient over them. A push that fails in transport, or comes back UNAVAILABLE or
// DEADLINE_EXCEEDED, is sent again with the same seq until it is acknowledged: the server
// applies it once and acknowledges the repeats as duplicates (ps-lite's resender).
//
// Thread-safety: one thread per client (it fans its calls out to one thread per server itself).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/ps.grpc.pb.h"
#include "ps/layout.h"
#include "ps/shard.h"
#include "ps/shared_server.h"

namespace weft::ps {

struct RemoteCaller {
  std::string job_id;
  int64_t attempt = 1;
  std::string credential;
  int learner = 0;
};

// The whole server's state split by shard: what a checkpoint keeps. Each shard's positions are
// its own: a checkpoint taken while a push has reached some shards and not others resumes each
// shard from where it stood, and the replayed push is a duplicate on the others.
struct ShardedState {
  std::vector<ServerState> shards;
  // Per learner, the smallest of the shards' positions: where its data resumes.
  std::vector<int64_t> ResumePositions() const;
};

class RemotePsClient {
 public:
  // Channels to `addresses` (host:port, shard i at addresses[i]) for `num_params` parameters;
  // over TLS when `server_cert_pem` is given: the attempt's shard certificate, pinned as the only
  // root and checked for kPsTlsName (a server without it fails every call, Unavailable).
  // InvalidArgument when there are no addresses, or more than parameters.
  static absl::StatusOr<std::unique_ptr<RemotePsClient>> Connect(
      const std::vector<std::string>& addresses, RemoteCaller caller, int64_t num_params,
      const std::string& server_cert_pem = "");

  // Rank 0: gives each server its range of `state` (config.num_params is the whole job's), and
  // waits up to `timeout_ms` (ms) for servers still starting. A server initialized already (a
  // retried Init) counts as done. `state.shards` empty: every shard from `fresh` (the fresh
  // model's parameters, version 0, zero optimizer state).
  absl::Status Init(const ServerConfig& config, const ShardedState& state,
                    const std::vector<float>& fresh, int64_t timeout_ms);
  // Gathers the parameters into out[num_params] (each shard's copy is consistent; together they
  // may be versions apart under asp/ssp). Waits up to `timeout_ms` for servers not initialized
  // or not reachable yet (DeadlineExceeded after it). Returns the sum of the shards' versions.
  // Unavailable when a server is shut down (the job is ending).
  absl::StatusOr<uint64_t> Pull(float* out, int64_t timeout_ms);
  // Pushes gradient `seq` (grad[num_params]) to every shard, each computed on the version its
  // last Pull returned, until each has acknowledged it (resending on UNAVAILABLE, transport
  // errors and DEADLINE_EXCEEDED) or `timeout_ms` passed (DeadlineExceeded). FailedPrecondition
  // when a server refuses the seq (a gap); Unavailable when a server is shut down.
  absl::Status Push(int64_t seq, const float* grad, bool non_finite, int64_t timeout_ms);
  // This learner has pushed its last gradient (each shard stops waiting for it under bsp/ssp).
  // Done, Snapshot, Progress and Shutdown ask every shard at once and fail with the first
  // shard's error (Unavailable when a server is shut down or unreachable).
  absl::Status Done();
  // Every shard's state, shard 0's counters (every push reaches every shard) and the pushes
  // all shards acknowledged as duplicates.
  absl::StatusOr<ShardedState> Snapshot(ApplierStats* stats, uint64_t* duplicates);
  // Per learner, the smallest of the shards' last applied seq (its data position), and shard 0's
  // counters: Snapshot without the floats.
  absl::StatusOr<std::vector<int64_t>> Progress(ApplierStats* stats);
  // Rank 0 at the end: every server exits.
  absl::Status Shutdown();

  // The smallest of the shards' last applied seq for this learner, as of the last Pull.
  int64_t applied() const;
  // Checked between resends: when it returns true, Pull and Push give up with Cancelled (the
  // learner was told to stop).
  void set_cancel(std::function<bool()> cancel) { cancel_ = std::move(cancel); }
  int shards() const { return static_cast<int>(stubs_.size()); }
  // Pushes sent again (after a lost acknowledgement or a timeout) since Connect.
  uint64_t resent() const { return resent_; }
  // Fault injection for tests: returning true for (shard, seq) drops that shard's
  // acknowledgement after it arrives, so the push is sent again.
  void set_drop_ack(std::function<bool(int shard, int64_t seq)> hook) {
    drop_ack_ = std::move(hook);
  }

 private:
  RemotePsClient(std::vector<std::unique_ptr<v1::ParameterServer::Stub>> stubs, RemoteCaller caller,
                 int64_t num_params);
  v1::PsCaller Caller() const;
  // Runs call(i) for every shard, on a thread each but the first; the first error.
  absl::Status ForEachShard(const std::function<absl::Status(int)>& call);
  // `method` (a call whose request is the caller alone) on every shard at once, each with the
  // usual deadline; the answers by shard in *responses. `what` names the call in errors ("... of
  // parameter server I: ..."); a shard that is shut down is Unavailable.
  template <typename Request, typename Response>
  absl::Status CallEachShard(grpc::Status (v1::ParameterServer::Stub::*method)(grpc::ClientContext*,
                                                                               const Request&,
                                                                               Response*),
                             const std::string& what, std::vector<Response>* responses);
  absl::Status PushShard(int shard, int64_t seq, const float* grad, bool non_finite,
                         int64_t timeout_ms);

  std::vector<std::unique_ptr<v1::ParameterServer::Stub>> stubs_;
  RemoteCaller caller_;
  std::vector<KeyRange> ranges_;
  std::vector<uint64_t> versions_;  // per shard, as of the last Pull
  std::vector<int64_t> applied_;
  std::atomic<uint64_t> resent_{0};
  std::function<bool(int, int64_t)> drop_ack_;
  std::function<bool()> cancel_;
};

}  // namespace weft::ps
