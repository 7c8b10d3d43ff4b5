// The parameter server as a ps learner (train/ps_trainer.h) uses it, whichever it is (internal to
// train/): GaDei's scale-up server in POSIX shared memory with its applier on a thread of rank
// 0 (training.ps.servers: 1, ps/shared_server.h), or the job's weft-ps servers over gRPC, each
// holding a key range (servers > 1, ps/remote_client.h).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ps/remote_client.h"
#include "ps/shared_server.h"
#include "train/training_loop.h"

namespace weft::train {

class PsLink {
 public:
  virtual ~PsLink() = default;

  // Rank 0: starts (scale-up) or initializes (scale-out) the server from `state` (a checkpoint's,
  // one ServerState per shard), or, with no shards in it, from `fresh` (the model as built).
  virtual absl::Status StartServer(const ps::ServerConfig& config, const ps::ShardedState& state,
                                   const std::vector<float>& fresh) = 0;
  // Every rank: takes its slot, waiting up to the timeout for rank 0's server; `stop` is checked
  // while it waits. Returns the position (batches of its share trained) it goes on from — a
  // replacement's predecessor's last applied one — or -1 when the server is closed already
  // (the job is ending).
  virtual absl::StatusOr<int64_t> Attach(const std::function<bool()>& stop) = 0;
  // The parameters into out[n]; returns their version. Unavailable: the server is closed.
  virtual absl::StatusOr<uint64_t> Pull(float* out) = 0;
  // The gradient of batch `position` of this learner's share (grad[n], computed on `version`),
  // returned once applied. Unavailable: the server is closed.
  virtual absl::Status Push(int64_t position, const float* grad, uint64_t version) = 0;
  // This learner's share is trained: rounds and the ssp bound stop waiting for it.
  virtual void Done() = 0;
  // This learner's gradients applied so far, and the position its slot started at (logging).
  virtual std::string SlotSummary() = 0;

  // Rank 0. Each learner's position (batches of its share whose gradients were applied), and the
  // server's counters.
  virtual absl::StatusOr<std::vector<int64_t>> Positions(ps::ApplierStats* stats) = 0;
  // The server's state for a checkpoint: one consistent snapshot per shard.
  virtual absl::StatusOr<ps::ShardedState> Snapshot() = 0;
  // Closes the server: the others' next call says so (Unavailable), and they exit.
  virtual void Close() = 0;
};

// Scale-up: the attempt's segment (ps::SegmentNameForJob). InvalidArgument for a job id that
// cannot name one.
absl::StatusOr<std::unique_ptr<PsLink>> SharedMemoryLink(const LearnerLaunch& learner,
                                                         int64_t timeout_ms);
// Scale-out: the servers of learner.ps_servers, `num_params` parameters cut into their ranges.
absl::StatusOr<std::unique_ptr<PsLink>> RemoteLink(const LearnerLaunch& learner, int64_t num_params,
                                                   int64_t timeout_ms);

}  // namespace weft::train
