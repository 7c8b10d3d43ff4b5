// weftd's gRPC Coordinator service (proto/coordinator.proto): the learners' way in. Each call is
// translated into a Controller method; the controller owns all state.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "control/controller.h"
#include "proto/coordinator.grpc.pb.h"

namespace weft {

class CoordinatorService final : public weft::v1::Coordinator::Service {
 public:
  explicit CoordinatorService(Controller& controller, int heartbeat_interval_ms)
      : controller_(controller), heartbeat_interval_ms_(heartbeat_interval_ms) {}

  grpc::Status Register(grpc::ServerContext*, const weft::v1::RegisterRequest* req,
                        weft::v1::RegisterResponse* resp) override;
  grpc::Status Heartbeat(grpc::ServerContext*, const weft::v1::HeartbeatRequest* req,
                         weft::v1::HeartbeatResponse* resp) override;
  grpc::Status ReportMetrics(grpc::ServerContext*, const weft::v1::ReportMetricsRequest* req,
                             weft::v1::ReportMetricsResponse* resp) override;
  grpc::Status CommitArtifact(grpc::ServerContext*, const weft::v1::CommitArtifactRequest* req,
                              weft::v1::CommitArtifactResponse* resp) override;
  grpc::Status CommitCheckpoint(grpc::ServerContext*,
                                const weft::v1::CommitCheckpointRequest* req,
                                weft::v1::CommitCheckpointResponse* resp) override;
  grpc::Status ReportFinished(grpc::ServerContext*, const weft::v1::ReportFinishedRequest* req,
                              weft::v1::ReportFinishedResponse* resp) override;

 private:
  // OK if `id` carries its job's learner credential; UNAUTHENTICATED otherwise.
  grpc::Status Authenticate(const weft::v1::LearnerIdentity& id) const;

  Controller& controller_;
  const int heartbeat_interval_ms_;
};

// A running gRPC server hosting one service.
class GrpcServer {
 public:
  // Binds `address` ("127.0.0.1:0" picks a free port). Unavailable if it cannot bind.
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Start(const std::string& address,
                                                           grpc::Service* service);
  ~GrpcServer();
  // The address learners should dial, with the port actually bound.
  const std::string& address() const { return address_; }
  void Shutdown();

 private:
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

}  // namespace weft
