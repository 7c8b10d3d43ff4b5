// weftd's gRPC Coordinator service (proto/coordinator.proto): the learners' way in. Each call is
// authenticated with the job's learner credential and translated into a LearnerEvents call
// (control/learner_events.h); the controller behind it owns all state.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "control/learner_credentials.h"
#include "control/learner_events.h"
#include "proto/coordinator.grpc.pb.h"

namespace weft {

class CoordinatorService final : public weft::v1::Coordinator::Service {
 public:
  CoordinatorService(LearnerEvents& events, const LearnerCredentials& credentials,
                     int heartbeat_interval_ms)
      : events_(events), credentials_(credentials), heartbeat_interval_ms_(heartbeat_interval_ms) {}

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

 private:
  // OK if `id` carries its job's learner credential; UNAUTHENTICATED otherwise.
  grpc::Status Authenticate(const weft::v1::LearnerIdentity& id) const;
  // The one path of every file a learner commits (models, checkpoints): authenticate, hand the
  // record to `commit`, answer accepted or refused with the reason.
  template <typename Request, typename Response, typename Record>
  grpc::Status Commit(const Request* req, Response* resp, const Record& record,
                      absl::Status (LearnerEvents::*commit)(const std::string&, int64_t,
                                                            const Record&));

  LearnerEvents& events_;
  const LearnerCredentials& credentials_;
  const int heartbeat_interval_ms_;
};

// A running gRPC server hosting one service.
class GrpcServer {
 public:
  // Binds `address` ("127.0.0.1:0" picks a free port), with TLS when `cert_pem` (the
  // certificate chain) and `key_pem` (its private key) are given, else in plain text.
  // Unavailable if it cannot bind (or the certificate and key do not load).
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Start(const std::string& address,
                                                           grpc::Service* service,
                                                           const std::string& cert_pem = "",
                                                           const std::string& key_pem = "");
  ~GrpcServer();
  // The address learners should dial, with the port actually bound.
  const std::string& address() const { return address_; }
  void Shutdown();

 private:
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

}  // namespace weft
