#include "control/coordinator_service.h"

#include "absl/strings/str_cat.h"

namespace weft {
namespace {

JobProgress FromProto(const weft::v1::Progress& p) {
  JobProgress out;
  out.epoch = p.epoch();
  out.epochs_total = p.epochs_total();
  out.step = p.step();
  out.steps_total = p.steps_total();
  out.samples = p.samples();
  return out;
}

}  // namespace

grpc::Status CoordinatorService::Authenticate(const weft::v1::LearnerIdentity& id) const {
  if (controller_.CheckLearnerCredential(id.job_id(), id.credential())) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      "the learner credential does not belong to job " + id.job_id());
}

grpc::Status CoordinatorService::Register(grpc::ServerContext*,
                                          const weft::v1::RegisterRequest* req,
                                          weft::v1::RegisterResponse* resp) {
  if (grpc::Status auth = Authenticate(req->learner()); !auth.ok()) return auth;
  const auto& id = req->learner();
  RegisterDecision d = controller_.OnRegister(id.job_id(), id.rank(), id.attempt(), req->pid());
  resp->set_accepted(d.accepted);
  resp->set_reason(d.reason);
  resp->set_heartbeat_interval_ms(heartbeat_interval_ms_);
  for (const auto& path : d.resume_from) resp->add_resume_from(path);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Heartbeat(grpc::ServerContext*,
                                           const weft::v1::HeartbeatRequest* req,
                                           weft::v1::HeartbeatResponse* resp) {
  if (grpc::Status auth = Authenticate(req->learner()); !auth.ok()) return auth;
  const auto& id = req->learner();
  bool keep = controller_.OnHeartbeat(id.job_id(), id.rank(), id.attempt(), FromProto(req->progress()));
  resp->set_keep_running(keep);
  if (!keep) resp->set_reason("the job no longer runs this attempt");
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::ReportMetrics(grpc::ServerContext*,
                                               const weft::v1::ReportMetricsRequest* req,
                                               weft::v1::ReportMetricsResponse* resp) {
  if (grpc::Status auth = Authenticate(req->learner()); !auth.ok()) return auth;
  std::vector<MetricRecord> points;
  points.reserve(req->points_size());
  for (const auto& p : req->points()) {
    MetricRecord m;
    m.step = p.step();
    m.epoch = p.epoch();
    m.wall_time_ms = p.wall_time_ms();
    m.train_loss = p.train_loss();
    m.samples_per_s = p.samples_per_s();
    if (p.has_test_accuracy()) m.test_accuracy = p.test_accuracy();
    if (p.has_test_loss()) m.test_loss = p.test_loss();
    points.push_back(m);
  }
  const auto& id = req->learner();
  resp->set_keep_running(
      controller_.OnMetrics(id.job_id(), id.rank(), id.attempt(), points, FromProto(req->progress())));
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::CommitArtifact(grpc::ServerContext*,
                                                const weft::v1::CommitArtifactRequest* req,
                                                weft::v1::CommitArtifactResponse* resp) {
  if (grpc::Status auth = Authenticate(req->learner()); !auth.ok()) return auth;
  ArtifactRecord a;
  a.kind = req->kind();
  a.path = req->path();
  a.card_path = req->card_path();
  a.test_accuracy = req->test_accuracy();
  a.epoch = req->epoch();
  a.step = req->step();
  a.bytes = req->bytes();
  absl::Status s =
      controller_.OnCommitArtifact(req->learner().job_id(), req->learner().attempt(), a);
  resp->set_accepted(s.ok());
  resp->set_reason(std::string(s.message()));
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::CommitCheckpoint(grpc::ServerContext*,
                                                  const weft::v1::CommitCheckpointRequest* req,
                                                  weft::v1::CommitCheckpointResponse* resp) {
  if (grpc::Status auth = Authenticate(req->learner()); !auth.ok()) return auth;
  CheckpointRecord c;
  c.path = req->path();
  c.epoch = req->epoch();
  c.step = req->step();
  c.bytes = req->bytes();
  absl::Status s =
      controller_.OnCommitCheckpoint(req->learner().job_id(), req->learner().attempt(), c);
  resp->set_accepted(s.ok());
  resp->set_reason(std::string(s.message()));
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::ReportFinished(grpc::ServerContext*,
                                                const weft::v1::ReportFinishedRequest* req,
                                                weft::v1::ReportFinishedResponse*) {
  if (grpc::Status auth = Authenticate(req->learner()); !auth.ok()) return auth;
  controller_.OnFinished(req->learner().job_id(), req->learner().rank(), req->learner().attempt(),
                         req->succeeded(),
                         req->reason());
  return grpc::Status::OK;
}

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(const std::string& address,
                                                              grpc::Service* service) {
  auto server = std::unique_ptr<GrpcServer>(new GrpcServer());
  int port = 0;
  grpc::ServerBuilder builder;
  // A port another process holds must fail to bind, not be shared.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(service);
  server->server_ = builder.BuildAndStart();
  if (!server->server_ || port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen for learners on ", address));
  }
  std::string host = address.substr(0, address.rfind(':'));
  server->address_ = absl::StrCat(host, ":", port);
  return server;
}

GrpcServer::~GrpcServer() { Shutdown(); }

void GrpcServer::Shutdown() {
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server_.reset();
  }
}

}  // namespace weft
