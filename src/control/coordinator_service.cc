#include "control/coordinator_service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/metrics.h"
#include "common/text.h"
#include "job/job_spec.h"

namespace weft {
namespace {

constexpr size_t kMaxReasonBytes = 2000;

JobProgress FromProto(const weft::v1::Progress& p) {
  return {p.epoch(), p.epochs_total(), p.step(), p.steps_total(), p.samples()};
}

// UNAVAILABLE: nothing was taken; the learner keeps what it sent and calls again
// (train/coordinator_reporter.cc retries UNAVAILABLE).
grpc::Status Unavailable(const std::string& why) {
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, why);
}

// A parameter-server job's counters as its rank 0 reports them (untrusted: at most the 8
// staleness buckets of ps/layout.h are read), kept as the job's gauges for GET /metrics.
void RecordParameterServer(const std::string& job, const weft::v1::Progress& p) {
  if (!p.has_parameter_server()) return;
  static const char* const kBuckets[] = {"0", "1", "2", "3-4", "5-8", "9-16", "17-32", "33+"};
  JobGauges& gauges = JobGauges::Global();
  static const bool declared = [&gauges] {
    gauges.Declare("weft_ps_versions",
                   "versions (parameter updates) a parameter-server job has applied in its "
                   "current attempt; rate() gives versions/s");
    gauges.Declare("weft_ps_gradients_applied",
                   "gradients a parameter-server job has applied in its current attempt");
    gauges.Declare("weft_ps_gradients_discarded",
                   "gradients a parameter-server job has discarded in its current attempt, by "
                   "reason");
    gauges.Declare("weft_ps_gradients_by_staleness",
                   "gradients a parameter-server job has applied in its current attempt, by "
                   "staleness (versions between the one computed on and the one updated)");
    return true;
  }();
  (void)declared;
  const weft::v1::ParameterServerStats& s = p.parameter_server();
  gauges.Set(job, "weft_ps_versions", {{{}, static_cast<double>(s.versions())}});
  gauges.Set(job, "weft_ps_gradients_applied", {{{}, static_cast<double>(s.gradients_applied())}});
  gauges.Set(job, "weft_ps_gradients_discarded",
             {{{{"reason", "non_finite"}}, static_cast<double>(s.discarded_non_finite())}});
  std::vector<std::pair<Labels, double>> staleness;
  for (int b = 0; b < std::min(s.staleness_size(), 8); ++b) {
    staleness.push_back({{{"staleness", kBuckets[b]}}, static_cast<double>(s.staleness(b))});
  }
  gauges.Set(job, "weft_ps_gradients_by_staleness", staleness);
}

}  // namespace

CoordinatorService::CoordinatorService(LearnerEvents& events, const LearnerCredentials& credentials,
                                       int heartbeat_interval_ms, const LearnerChannels* channels,
                                       RateLimit metric_points)
    : events_(events),
      credentials_(credentials),
      heartbeat_interval_ms_(heartbeat_interval_ms),
      channels_(channels),
      metric_points_(metric_points, SystemClock::Get()) {
  MetricsRegistry::Global().DeclareCounter(
      kMetricPointsDroppedMetric,
      "metric points learners reported past their job's budget (weftd --metric-points-per-second) "
      "and weftd dropped");
}

void CoordinatorService::ThrottleMetrics(const std::string& job_id,
                                         std::vector<MetricRecord>* points) {
  const int64_t wanted = static_cast<int64_t>(points->size());
  const int64_t granted = metric_points_.TakeUpTo(job_id, wanted);
  if (granted == wanted) return;
  // Evaluations carry what targets are decided on: they are kept first.
  int64_t evaluations = 0;
  for (const MetricRecord& m : *points) evaluations += m.test_accuracy.has_value();
  int64_t others_kept = std::max<int64_t>(0, granted - evaluations);
  int64_t evaluations_kept = granted - others_kept;
  std::vector<MetricRecord> kept;
  kept.reserve(static_cast<size_t>(granted));
  for (MetricRecord& m : *points) {
    int64_t& room = m.test_accuracy ? evaluations_kept : others_kept;
    if (room > 0) {
      --room;
      kept.push_back(std::move(m));
    }
  }
  points->swap(kept);
  const int64_t dropped = wanted - granted;
  MetricsRegistry::Global().Add(kMetricPointsDroppedMetric, {}, static_cast<double>(dropped));
  const TimeMs now = SystemClock::Get().NowMs();
  absl::MutexLock lock(&mu_);
  if (dropped_.size() > 1024) {
    for (auto it = dropped_.begin(); it != dropped_.end();) {
      it = now - it->second.logged_ms > 600'000 ? dropped_.erase(it) : std::next(it);
    }
  }
  Dropped& d = dropped_[job_id];
  d.points += dropped;
  if (now - d.logged_ms < 60'000) return;
  spdlog::warn(
      "job {}: dropped {} metric points its learner reported past the job's budget (weftd "
      "--metric-points-per-second)",
      job_id, d.points);
  d = {0, now};
}

void CoordinatorService::SetCoordinators(std::vector<std::string> addresses) {
  absl::MutexLock lock(&mu_);
  coordinators_ = std::move(addresses);
}

template <typename Response>
void CoordinatorService::AddCoordinators(Response* resp) {
  absl::MutexLock lock(&mu_);
  for (const std::string& a : coordinators_) resp->add_coordinators(a);
}

int CoordinatorService::NextHeartbeatMs(const std::string& job_id) {
  if (!events_.NewcomersStarting(job_id)) return 0;
  return std::min(heartbeat_interval_ms_, kJoiningHeartbeatMs);
}

grpc::Status CoordinatorService::Authenticate(grpc::ServerContext* ctx,
                                              const weft::v1::LearnerIdentity& id) const {
  if (!credentials_.Check(id.job_id(), id.attempt(), id.credential())) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "the learner credential does not belong to attempt " +
                            std::to_string(id.attempt()) + " of job " + id.job_id());
  }
  // Through an attempt's own socket, only that attempt's calls (control/learner_channels.h).
  if (channels_ != nullptr && ctx != nullptr &&
      !channels_->Allows(ctx->peer(), id.job_id(), id.attempt())) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "this channel serves another job attempt");
  }
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Register(grpc::ServerContext* ctx,
                                          const weft::v1::RegisterRequest* req,
                                          weft::v1::RegisterResponse* resp) {
  if (grpc::Status auth = Authenticate(ctx, req->learner()); !auth.ok()) return auth;
  const auto& id = req->learner();
  // What a learner reports is tenant input: a bounded list of indices.
  constexpr int kMaxGpus = 64;
  if (req->gpus_size() > kMaxGpus) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("at most ", kMaxGpus, " GPUs per learner"));
  }
  const std::vector<int> gpus(req->gpus().begin(), req->gpus().end());
  RegisterDecision d =
      events_.OnRegister(id.job_id(), id.rank(), id.attempt(), req->pid(), req->world_size(), gpus);
  if (d.retry) return Unavailable(d.reason);
  resp->set_accepted(d.accepted);
  resp->set_reason(d.reason);
  resp->set_heartbeat_interval_ms(heartbeat_interval_ms_);
  for (const auto& path : d.resume_from) resp->add_resume_from(path);
  AddCoordinators(resp);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Heartbeat(grpc::ServerContext* ctx,
                                           const weft::v1::HeartbeatRequest* req,
                                           weft::v1::HeartbeatResponse* resp) {
  if (grpc::Status auth = Authenticate(ctx, req->learner()); !auth.ok()) return auth;
  const auto& id = req->learner();
  RecordParameterServer(id.job_id(), req->progress());
  const ReportAnswer answer =
      events_.OnHeartbeat(id.job_id(), id.rank(), id.attempt(), FromProto(req->progress()));
  if (answer == ReportAnswer::kRetry) return Unavailable("the store cannot be reached");
  const bool keep = answer == ReportAnswer::kKeepRunning;
  resp->set_keep_running(keep);
  if (!keep) resp->set_reason("the job no longer runs this attempt");
  if (keep) {
    resp->set_generation(events_.Generation(id.job_id()));
    resp->set_next_heartbeat_ms(NextHeartbeatMs(id.job_id()));
  }
  AddCoordinators(resp);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::ReportMetrics(grpc::ServerContext* ctx,
                                               const weft::v1::ReportMetricsRequest* req,
                                               weft::v1::ReportMetricsResponse* resp) {
  if (grpc::Status auth = Authenticate(ctx, req->learner()); !auth.ok()) return auth;
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
    // Reported by the learner: a size no job can have is taken as not said.
    if (p.world_size() >= 1 && p.world_size() <= kMaxLearners) m.world_size = p.world_size();
    points.push_back(m);
  }
  const auto& id = req->learner();
  ThrottleMetrics(id.job_id(), &points);
  RecordParameterServer(id.job_id(), req->progress());
  const ReportAnswer answer =
      events_.OnMetrics(id.job_id(), id.rank(), id.attempt(), points, FromProto(req->progress()));
  if (answer == ReportAnswer::kRetry) return Unavailable("the store cannot be reached");
  resp->set_keep_running(answer == ReportAnswer::kKeepRunning);
  if (answer == ReportAnswer::kKeepRunning) {
    resp->set_generation(events_.Generation(id.job_id()));
    resp->set_next_heartbeat_ms(NextHeartbeatMs(id.job_id()));
  }
  AddCoordinators(resp);
  return grpc::Status::OK;
}

template <typename Request, typename Response, typename Record>
grpc::Status CoordinatorService::Commit(
    grpc::ServerContext* ctx, const Request* req, Response* resp, const Record& record,
    absl::Status (LearnerEvents::*commit)(const std::string&, int64_t, const Record&)) {
  if (grpc::Status auth = Authenticate(ctx, req->learner()); !auth.ok()) return auth;
  absl::Status s = (events_.*commit)(req->learner().job_id(), req->learner().attempt(), record);
  if (absl::IsUnavailable(s)) return Unavailable(std::string(s.message()));
  resp->set_accepted(s.ok());
  resp->set_reason(std::string(s.message()));
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::CommitModel(grpc::ServerContext* ctx,
                                             const weft::v1::CommitModelRequest* req,
                                             weft::v1::CommitModelResponse* resp) {
  ModelRecord a{req->kind(),  req->path(), req->card_path(), req->test_accuracy(),
                req->epoch(), req->step(), req->bytes(),     0};
  return Commit(ctx, req, resp, a, &LearnerEvents::OnCommitModel);
}

grpc::Status CoordinatorService::CommitCheckpoint(grpc::ServerContext* ctx,
                                                  const weft::v1::CommitCheckpointRequest* req,
                                                  weft::v1::CommitCheckpointResponse* resp) {
  CheckpointRecord c{req->step(), req->epoch(), req->path(), req->bytes(), 0, req->write_seconds()};
  return Commit(ctx, req, resp, c, &LearnerEvents::OnCommitCheckpoint);
}

grpc::Status CoordinatorService::ReportFinished(grpc::ServerContext* ctx,
                                                const weft::v1::ReportFinishedRequest* req,
                                                weft::v1::ReportFinishedResponse*) {
  if (grpc::Status auth = Authenticate(ctx, req->learner()); !auth.ok()) return auth;
  // A learner's reason is tenant input that ends up in the history, the API and weftd's log.
  absl::Status s =
      events_.OnFinished(req->learner().job_id(), req->learner().rank(), req->learner().attempt(),
                         req->succeeded(), Printable(req->reason(), kMaxReasonBytes));
  if (absl::IsUnavailable(s)) return Unavailable(std::string(s.message()));
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Regroup(grpc::ServerContext* ctx,
                                         const weft::v1::RegroupRequest* req,
                                         weft::v1::RegroupResponse* resp) {
  if (grpc::Status auth = Authenticate(ctx, req->learner()); !auth.ok()) return auth;
  absl::StatusOr<RegroupDecision> d = events_.OnRegroup(
      req->learner().job_id(), req->learner().rank(), req->learner().attempt(), req->generation());
  if (!d.ok()) return Unavailable(std::string(d.status().message()));
  using Kind = RegroupDecision::Kind;
  resp->set_decision(d->kind == Kind::kReform ? weft::v1::RegroupResponse::REFORM
                     : d->kind == Kind::kStop ? weft::v1::RegroupResponse::STOP
                                              : weft::v1::RegroupResponse::WAIT);
  resp->set_generation(d->generation);
  resp->set_rank(d->rank);
  resp->set_world_size(d->world_size);
  resp->set_rendezvous_host(d->rendezvous_host);
  resp->set_rendezvous_port(d->rendezvous_port);
  resp->set_reason(d->reason);
  return grpc::Status::OK;
}

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(
    const std::string& address, grpc::Service* service, const std::string& cert_pem,
    const std::string& key_pem, const std::vector<std::string>& also) {
  auto server = std::unique_ptr<GrpcServer>(new GrpcServer());
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (!cert_pem.empty()) {
    grpc::SslServerCredentialsOptions tls;
    tls.pem_key_cert_pairs.push_back({key_pem, cert_pem});
    credentials = grpc::SslServerCredentials(tls);
  }
  int port = 0;
  // With `also` first; a server is built with every port bound or not at all.
  for (bool with_also : {true, false}) {
    if (with_also && also.empty()) continue;
    grpc::ServerBuilder builder;
    // A port another process holds must fail to bind, not be shared.
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    builder.AddListeningPort(address, credentials, &port);
    std::vector<int> also_ports(also.size());
    for (size_t i = 0; with_also && i < also.size(); ++i) {
      builder.AddListeningPort(also[i], credentials, &also_ports[i]);
    }
    builder.RegisterService(service);
    server->server_ = builder.BuildAndStart();
    if (server->server_ && port != 0) {
      if (with_also) server->also_ = also;
      break;
    }
    server->server_.reset();
  }
  if (!server->server_ || port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen for learners on ", address,
                     cert_pem.empty() ? "" : " (or the TLS certificate and key do not load)"));
  }
  std::string host = address.substr(0, address.rfind(':'));
  server->address_ = absl::StrCat(host, ":", port);
  return server;
}

void StandbyCoordinatorService::SetMessage(std::string why) {
  absl::MutexLock lock(&mu_);
  why_ = std::move(why);
}

grpc::Status StandbyCoordinatorService::Answer() {
  absl::MutexLock lock(&mu_);
  return Unavailable(why_);
}

grpc::Status StandbyCoordinatorService::Register(grpc::ServerContext*,
                                                 const weft::v1::RegisterRequest*,
                                                 weft::v1::RegisterResponse*) {
  return Answer();
}
grpc::Status StandbyCoordinatorService::Heartbeat(grpc::ServerContext*,
                                                  const weft::v1::HeartbeatRequest*,
                                                  weft::v1::HeartbeatResponse*) {
  return Answer();
}
grpc::Status StandbyCoordinatorService::ReportMetrics(grpc::ServerContext*,
                                                      const weft::v1::ReportMetricsRequest*,
                                                      weft::v1::ReportMetricsResponse*) {
  return Answer();
}
grpc::Status StandbyCoordinatorService::CommitModel(grpc::ServerContext*,
                                                    const weft::v1::CommitModelRequest*,
                                                    weft::v1::CommitModelResponse*) {
  return Answer();
}
grpc::Status StandbyCoordinatorService::CommitCheckpoint(grpc::ServerContext*,
                                                         const weft::v1::CommitCheckpointRequest*,
                                                         weft::v1::CommitCheckpointResponse*) {
  return Answer();
}
grpc::Status StandbyCoordinatorService::ReportFinished(grpc::ServerContext*,
                                                       const weft::v1::ReportFinishedRequest*,
                                                       weft::v1::ReportFinishedResponse*) {
  return Answer();
}

grpc::Status StandbyCoordinatorService::Regroup(grpc::ServerContext*,
                                                const weft::v1::RegroupRequest*,
                                                weft::v1::RegroupResponse*) {
  return Answer();
}

GrpcServer::~GrpcServer() { Shutdown(); }

void GrpcServer::Shutdown(std::chrono::milliseconds grace) {
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + grace);
    server_.reset();
  }
}

}  // namespace weft
