// weftd's gRPC Coordinator service (proto/coordinator.proto): the learners' way in. Each call is
// authenticated with the job's learner credential and translated into a LearnerEvents call
// (control/learner_events.h); the controller behind it owns all state.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/rate_limit.h"
#include "control/learner_channels.h"
#include "control/learner_credentials.h"
#include "control/learner_events.h"
#include "proto/coordinator.grpc.pb.h"

namespace weft {

inline constexpr char kMetricPointsDroppedMetric[] = "weft_metric_points_dropped_total";

class CoordinatorService final : public weft::v1::Coordinator::Service {
 public:
  // `channels` (borrowed; may be null): the attempts' sockets of contained learners, whose
  // calls are held to their own attempt. `metric_points`: the metric points a job may report,
  // per second and in a burst (weftd --metric-points-per-second); past them a report's points
  // are dropped — evaluations (test accuracy) last — counted in weft_metric_points_dropped_total
  // and logged at most once a minute per job, and the report itself (its progress, the learner's
  // liveness) goes through as any heartbeat does.
  CoordinatorService(LearnerEvents& events, const LearnerCredentials& credentials,
                     int heartbeat_interval_ms, const LearnerChannels* channels = nullptr,
                     RateLimit metric_points = {50, 500});

  grpc::Status Register(grpc::ServerContext*, const weft::v1::RegisterRequest* req,
                        weft::v1::RegisterResponse* resp) override;
  grpc::Status Heartbeat(grpc::ServerContext*, const weft::v1::HeartbeatRequest* req,
                         weft::v1::HeartbeatResponse* resp) override;
  grpc::Status ReportMetrics(grpc::ServerContext*, const weft::v1::ReportMetricsRequest* req,
                             weft::v1::ReportMetricsResponse* resp) override;
  grpc::Status CommitModel(grpc::ServerContext*, const weft::v1::CommitModelRequest* req,
                           weft::v1::CommitModelResponse* resp) override;
  grpc::Status CommitCheckpoint(grpc::ServerContext*, const weft::v1::CommitCheckpointRequest* req,
                                weft::v1::CommitCheckpointResponse* resp) override;
  grpc::Status ReportFinished(grpc::ServerContext*, const weft::v1::ReportFinishedRequest* req,
                              weft::v1::ReportFinishedResponse* resp) override;
  grpc::Status Regroup(grpc::ServerContext*, const weft::v1::RegroupRequest* req,
                       weft::v1::RegroupResponse* resp) override;

  // The coordinator addresses answers tell learners of (every weftd's, the leader's first);
  // empty (the default): none, learners keep theirs.
  void SetCoordinators(std::vector<std::string> addresses);

 private:
  // The heartbeat interval (ms) asked of a job's learners while a newcomer of it is starting.
  static constexpr int kJoiningHeartbeatMs = 100;

  template <typename Response>
  void AddCoordinators(Response* resp);
  // What answers put in next_heartbeat_ms for a learner of `job_id`: kJoiningHeartbeatMs while
  // the job has newcomers starting, else 0 (the usual interval).
  int NextHeartbeatMs(const std::string& job_id);
  // OK if `id` carries its job's learner credential (UNAUTHENTICATED otherwise) and `ctx`'s
  // connection may act for its attempt (PERMISSION_DENIED otherwise).
  grpc::Status Authenticate(grpc::ServerContext* ctx, const weft::v1::LearnerIdentity& id) const;
  // The one path of every file a learner commits (models, checkpoints): authenticate, hand the
  // record to `commit`, answer accepted or refused with the reason.
  template <typename Request, typename Response, typename Record>
  grpc::Status Commit(grpc::ServerContext* ctx, const Request* req, Response* resp,
                      const Record& record,
                      absl::Status (LearnerEvents::*commit)(const std::string&, int64_t,
                                                            const Record&));

  // Keeps of `points` (job `job_id`'s report) what its metric point budget allows, evaluations
  // first, each kept point where it was; counts and logs what it dropped.
  void ThrottleMetrics(const std::string& job_id, std::vector<MetricRecord>* points);

  LearnerEvents& events_;
  const LearnerCredentials& credentials_;
  const int heartbeat_interval_ms_;
  const LearnerChannels* const channels_;
  RateLimiter metric_points_;  // by job
  absl::Mutex mu_;
  std::vector<std::string> coordinators_ ABSL_GUARDED_BY(mu_);
  // Points dropped for each job since its last log line about them, and when that was.
  struct Dropped {
    int64_t points = 0;
    TimeMs logged_ms = 0;
  };
  std::map<std::string, Dropped> dropped_ ABSL_GUARDED_BY(mu_);
};

// What a standby weftd's coordinator answers (daemon/leader.h: active/standby, docs/deploy.md):
// UNAVAILABLE to every call, naming the leader, so a learner tries its next address.
class StandbyCoordinatorService final : public weft::v1::Coordinator::Service {
 public:
  // `why` is the message of every answer, e.g. "standby; the leader is weftd-b".
  void SetMessage(std::string why);

  grpc::Status Register(grpc::ServerContext*, const weft::v1::RegisterRequest*,
                        weft::v1::RegisterResponse*) override;
  grpc::Status Heartbeat(grpc::ServerContext*, const weft::v1::HeartbeatRequest*,
                         weft::v1::HeartbeatResponse*) override;
  grpc::Status ReportMetrics(grpc::ServerContext*, const weft::v1::ReportMetricsRequest*,
                             weft::v1::ReportMetricsResponse*) override;
  grpc::Status CommitModel(grpc::ServerContext*, const weft::v1::CommitModelRequest*,
                           weft::v1::CommitModelResponse*) override;
  grpc::Status CommitCheckpoint(grpc::ServerContext*, const weft::v1::CommitCheckpointRequest*,
                                weft::v1::CommitCheckpointResponse*) override;
  grpc::Status ReportFinished(grpc::ServerContext*, const weft::v1::ReportFinishedRequest*,
                              weft::v1::ReportFinishedResponse*) override;
  grpc::Status Regroup(grpc::ServerContext*, const weft::v1::RegroupRequest*,
                       weft::v1::RegroupResponse*) override;

 private:
  grpc::Status Answer();
  absl::Mutex mu_;
  std::string why_ ABSL_GUARDED_BY(mu_) = "this weftd is a standby";
};

// A running gRPC server hosting one service.
class GrpcServer {
 public:
  // Binds `address` ("127.0.0.1:0" picks a free port), with TLS when `cert_pem` (the
  // certificate chain) and `key_pem` (its private key) are given, else in plain text; and each
  // of `also` that can be bound too (none if one cannot: the others are best effort).
  // Unavailable if it cannot bind `address` (or the certificate and key do not load).
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Start(
      const std::string& address, grpc::Service* service, const std::string& cert_pem = "",
      const std::string& key_pem = "", const std::vector<std::string>& also = {});
  ~GrpcServer();
  // The address learners should dial, with the port actually bound.
  const std::string& address() const { return address_; }
  // The server itself (LearnerChannels hands it connections).
  grpc::Server* server() const { return server_.get(); }
  // Those of Start's `also` it listens on too (all or none).
  const std::vector<std::string>& also() const { return also_; }
  // Stops serving: calls in flight get up to `grace` to finish, then are cancelled.
  void Shutdown(std::chrono::milliseconds grace = std::chrono::seconds(2));

 private:
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::vector<std::string> also_;
};

}  // namespace weft
