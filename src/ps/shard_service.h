// weft-ps's gRPC service (proto/ps.proto): one Shard of one job attempt, created by rank 0's
// Init, answered to the job's learners only (their credential, their attempt).
//
// Thread-safety: gRPC calls the handlers from its threads; all state is behind a mutex or in the
// Shard (thread-safe).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/tls_identity.h"
#include "proto/ps.grpc.pb.h"
#include "ps/shard.h"

namespace weft::ps {

// The largest gRPC message a shard takes or sends (bytes): the parameters and the optimizer
// state of a 64M-parameter shard under Adam, and room to spare.
inline constexpr int kMaxPsMessageBytes = 1 << 30;

class ShardService final : public v1::ParameterServer::Service {
 public:
  // Serves `job_id`'s learners holding `credential` (compared in constant time). `on_shutdown`
  // runs (on a gRPC thread, after the answer is queued) when rank 0 calls Shutdown.
  ShardService(std::string job_id, std::string credential, std::function<void()> on_shutdown);

  // Fault injection for tests: a hook returning true for (learner, seq) applies that push and
  // then answers UNAVAILABLE, as if the acknowledgement were lost on the way back.
  void set_drop_ack(std::function<bool(int learner, int64_t seq)> hook) {
    drop_ack_ = std::move(hook);
  }
  // The shard once initialized (nullptr before): tests read its counters.
  std::shared_ptr<Shard> shard();

  grpc::Status Init(grpc::ServerContext* context, const v1::PsInitRequest* request,
                    v1::PsInitResponse* response) override;
  grpc::Status Pull(grpc::ServerContext* context, const v1::PsPullRequest* request,
                    v1::PsPullResponse* response) override;
  grpc::Status Push(grpc::ServerContext* context, const v1::PsPushRequest* request,
                    v1::PsPushResponse* response) override;
  grpc::Status Done(grpc::ServerContext* context, const v1::PsDoneRequest* request,
                    v1::PsDoneResponse* response) override;
  grpc::Status Snapshot(grpc::ServerContext* context, const v1::PsSnapshotRequest* request,
                        v1::PsSnapshotResponse* response) override;
  grpc::Status Progress(grpc::ServerContext* context, const v1::PsProgressRequest* request,
                        v1::PsProgressResponse* response) override;
  grpc::Status Shutdown(grpc::ServerContext* context, const v1::PsShutdownRequest* request,
                        v1::PsShutdownResponse* response) override;

 private:
  // The caller's shard: UNAUTHENTICATED for a wrong credential, FAILED_PRECONDITION for another
  // job or attempt, UNAVAILABLE before Init.
  grpc::Status Check(const v1::PsCaller& caller, std::shared_ptr<Shard>* shard);
  bool CredentialMatches(const std::string& given) const;

  const std::string job_id_;
  const std::string credential_;
  const std::function<void()> on_shutdown_;
  std::function<bool(int, int64_t)> drop_ack_;
  absl::Mutex mu_;
  std::shared_ptr<Shard> shard_ ABSL_GUARDED_BY(mu_);
  int64_t attempt_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t begin_ ABSL_GUARDED_BY(mu_) = 0;
};

struct ShardServerOptions {
  std::string listen;      // host:port; port 0 picks a free one
  std::string job_id;      // the job it serves
  std::string credential;  // the attempt's parameter-server credential learners present
  // The attempt's TLS identity for kPsTlsName (common/tls_identity.h); cert_pem empty: plain
  // text (weftd without a certificate).
  TlsIdentity tls;
  // n > 0: fault injection for tests (weft-ps's WEFT_LEARNER_PS_DROP_ACKS): the acknowledgement
  // of every n-th push taken is dropped after the push is applied.
  int64_t drop_ack_every = 0;
};

// Runs a ShardService on options.listen until rank 0's Shutdown, or until `stop` is set (checked
// every 100 ms; nullptr: never) while no shard is initialized: a server holding one waits for
// rank 0 to checkpoint from it and shut it down. Logs the shard's account when it ends.
// Unavailable when the address cannot be bound or the TLS identity does not load.
absl::Status ServeShard(const ShardServerOptions& options, const std::atomic<bool>* stop);

}  // namespace weft::ps
