#include "train/coordinator_reporter.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <chrono>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "common/logging.h"

namespace weft::train {
namespace {

constexpr int kRpcTimeoutMs = 5000;
constexpr int kRetryBudgetMs = 120000;  // how long blocking calls keep retrying

std::unique_ptr<grpc::ClientContext> Context(int timeout_ms = kRpcTimeoutMs) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  return ctx;
}

void ToProto(const ProgressReport& p, weft::v1::Progress* out) {
  out->set_epoch(p.epoch);
  out->set_epochs_total(p.epochs_total);
  out->set_step(p.step);
  out->set_steps_total(p.steps_total);
  out->set_samples(p.samples);
  if (p.parameter_server) {
    auto* ps = out->mutable_parameter_server();
    ps->set_versions(p.parameter_server->version);
    ps->set_gradients_applied(p.parameter_server->gradients_applied);
    ps->set_discarded_non_finite(p.parameter_server->discarded_non_finite);
    for (uint64_t n : p.parameter_server->staleness) ps->add_staleness(n);
  }
}

// A call that may be sent again: weftd did not take it, or went away while it was in flight
// (a server shut down mid-call cancels it). Commits are safe to repeat (they replace by kind or
// step); a metrics batch whose answer was lost after weftd took it is stored twice, as after a
// deadline.
bool Transient(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE ||
         s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
         s.error_code() == grpc::StatusCode::CANCELLED;
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const std::string& ca_pem) {
  if (ca_pem.empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions tls;
  tls.pem_root_certs = ca_pem;
  return grpc::SslCredentials(tls);
}

}  // namespace

CoordinatorReporter::CoordinatorReporter(const std::string& address, std::string job_id, int rank,
                                         int64_t attempt, std::string credential,
                                         const std::string& ca_pem)
    : job_id_(std::move(job_id)),
      rank_(rank),
      attempt_(attempt),
      credential_(std::move(credential)),
      ca_pem_(ca_pem) {
  std::vector<std::string> addresses = absl::StrSplit(address, ',', absl::SkipWhitespace());
  if (addresses.empty()) addresses.push_back(address);
  UseCoordinators(addresses);
}

std::shared_ptr<CoordinatorReporter::Stub> CoordinatorReporter::Current() {
  absl::MutexLock lock(&stub_mu_);
  return stubs_[current_];
}

void CoordinatorReporter::Failover(const std::shared_ptr<Stub>& failed) {
  absl::MutexLock lock(&stub_mu_);
  if (stubs_.size() < 2 || stubs_[current_] != failed) return;
  current_ = (current_ + 1) % stubs_.size();
  spdlog::info("trying weftd's coordinator at {}", addresses_[current_]);
}

template <typename Addresses>
void CoordinatorReporter::UseCoordinators(const Addresses& addresses) {
  std::vector<std::string> list(addresses.begin(), addresses.end());
  absl::MutexLock lock(&stub_mu_);
  if (list.empty() || list == addresses_) return;
  // A learner in a container reaches weftd only through its attempt's socket: the TCP addresses
  // weftd's answers name are out of its network's reach.
  if (!addresses_.empty() && absl::StartsWith(addresses_[0], "unix:")) return;
  stubs_.clear();
  for (const std::string& a : list) {
    stubs_.push_back(
        weft::v1::Coordinator::NewStub(grpc::CreateChannel(a, ChannelCredentials(ca_pem_))));
  }
  addresses_ = std::move(list);
  current_ = 0;
}

template <typename Rpc>
grpc::Status CoordinatorReporter::Retry(Rpc rpc) {
  int backoff_ms = 100;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kRetryBudgetMs);
  while (true) {
    std::shared_ptr<Stub> stub = Current();
    grpc::Status s = rpc(*stub);
    if (s.ok() || !Transient(s)) return s;
    Failover(stub);
    if (std::chrono::steady_clock::now() > deadline) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms));
    backoff_ms = std::min(backoff_ms * 2, 2000);
  }
}

CoordinatorReporter::~CoordinatorReporter() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

weft::v1::LearnerIdentity CoordinatorReporter::Identity() const {
  weft::v1::LearnerIdentity id;
  id.set_job_id(job_id_);
  id.set_rank(rank_);
  id.set_attempt(attempt_);
  id.set_credential(credential_);
  return id;
}

absl::Status CoordinatorReporter::Register(int world_size, const std::vector<int>& gpus) {
  weft::v1::RegisterRequest req;
  *req.mutable_learner() = Identity();
  req.set_pid(::getpid());
  req.set_world_size(world_size);
  for (int g : gpus) req.add_gpus(g);
  weft::v1::RegisterResponse resp;
  grpc::Status s = Retry([&](Stub& stub) { return stub.Register(Context().get(), req, &resp); });
  if (!s.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot reach weftd's coordinator: ", s.error_message()));
  }
  if (!resp.accepted()) {
    keep_running_ = false;
    return absl::FailedPreconditionError(
        absl::StrCat("weftd refused this learner: ", resp.reason()));
  }
  if (resp.heartbeat_interval_ms() > 0) heartbeat_ms_ = resp.heartbeat_interval_ms();
  resume_from_.assign(resp.resume_from().begin(), resp.resume_from().end());
  UseCoordinators(resp.coordinators());
  thread_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

void CoordinatorReporter::Report(const MetricSample& sample, const ProgressReport& progress) {
  absl::MutexLock lock(&mu_);
  queued_.push_back(sample);
  progress_ = progress;
}

void CoordinatorReporter::ReportProgress(const ProgressReport& progress) {
  absl::MutexLock lock(&mu_);
  progress_ = progress;
}

bool CoordinatorReporter::Flush() {
  absl::MutexLock send_lock(&send_mu_);
  std::vector<MetricSample> batch;
  ProgressReport progress;
  {
    absl::MutexLock lock(&mu_);
    batch.swap(queued_);
    progress = progress_;
  }
  grpc::Status s;
  bool keep = true;
  std::shared_ptr<Stub> stub = Current();
  if (batch.empty()) {
    weft::v1::HeartbeatRequest req;
    *req.mutable_learner() = Identity();
    ToProto(progress, req.mutable_progress());
    weft::v1::HeartbeatResponse resp;
    s = stub->Heartbeat(Context().get(), req, &resp);
    keep = resp.keep_running();
    if (s.ok()) UseCoordinators(resp.coordinators());
    if (s.ok() && resp.generation() > 0) generation_.store(resp.generation());
    if (s.ok()) next_heartbeat_ms_.store(resp.next_heartbeat_ms());
  } else {
    weft::v1::ReportMetricsRequest req;
    *req.mutable_learner() = Identity();
    ToProto(progress, req.mutable_progress());
    for (const MetricSample& m : batch) {
      auto* p = req.add_points();
      p->set_step(m.step);
      p->set_epoch(m.epoch);
      p->set_wall_time_ms(m.wall_time_ms);
      p->set_train_loss(m.train_loss);
      p->set_samples_per_s(m.samples_per_s);
      p->set_world_size(m.world_size);
      if (m.test_accuracy) p->set_test_accuracy(*m.test_accuracy);
      if (m.test_loss) p->set_test_loss(*m.test_loss);
    }
    weft::v1::ReportMetricsResponse resp;
    s = stub->ReportMetrics(Context().get(), req, &resp);
    keep = resp.keep_running();
    if (s.ok()) UseCoordinators(resp.coordinators());
    if (s.ok() && resp.generation() > 0) generation_.store(resp.generation());
    if (s.ok()) next_heartbeat_ms_.store(resp.next_heartbeat_ms());
    if (!s.ok()) {
      // Put the batch back in front of anything queued since, so nothing is lost or reordered.
      absl::MutexLock lock(&mu_);
      batch.insert(batch.end(), queued_.begin(), queued_.end());
      queued_.swap(batch);
    }
  }
  if (!s.ok()) {
    spdlog::warn("weftd unreachable ({}), will retry", s.error_message());
    if (Transient(s)) Failover(stub);
    return false;
  }
  if (!keep && keep_running_.exchange(false)) {
    spdlog::info("weftd asked this learner to stop");
  }
  return true;
}

void CoordinatorReporter::Loop() {
  int backoff_ms = 0;
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    // weftd may ask for the next one sooner (a newcomer is starting), never for one later.
    const int asked_ms = next_heartbeat_ms_.load();
    int wait_ms = backoff_ms > 0 ? backoff_ms
                  : asked_ms > 0 ? std::min(asked_ms, heartbeat_ms_.load())
                                 : heartbeat_ms_.load();
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Milliseconds(wait_ms));
    if (stopping_) break;
    mu_.Unlock();
    bool ok = Flush();
    backoff_ms = ok ? 0 : std::min(std::max(backoff_ms * 2, 250), 5000);
    mu_.Lock();
  }
}

absl::Status CoordinatorReporter::CommitModel(const ModelFile& a) {
  Flush();  // metrics up to this point first, so the model's accuracy is in the series
  weft::v1::CommitModelRequest req;
  *req.mutable_learner() = Identity();
  req.set_kind(a.kind);
  req.set_path(a.path);
  req.set_card_path(a.card_path);
  req.set_test_accuracy(a.test_accuracy);
  req.set_epoch(a.epoch);
  req.set_step(a.step);
  req.set_bytes(a.bytes);
  weft::v1::CommitModelResponse resp;
  grpc::Status s = Retry([&](Stub& stub) { return stub.CommitModel(Context().get(), req, &resp); });
  if (!s.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot commit ", a.kind, " model: ", s.error_message()));
  }
  if (!resp.accepted()) {
    return absl::FailedPreconditionError(
        absl::StrCat("weftd refused the ", a.kind, " model: ", resp.reason()));
  }
  return absl::OkStatus();
}

absl::Status CoordinatorReporter::CommitCheckpoint(const std::string& path, int epoch, int64_t step,
                                                   int64_t bytes, double write_seconds) {
  weft::v1::CommitCheckpointRequest req;
  *req.mutable_learner() = Identity();
  req.set_path(path);
  req.set_epoch(epoch);
  req.set_step(step);
  req.set_bytes(bytes);
  req.set_write_seconds(write_seconds);
  weft::v1::CommitCheckpointResponse resp;
  grpc::Status s =
      Retry([&](Stub& stub) { return stub.CommitCheckpoint(Context().get(), req, &resp); });
  if (!s.ok()) {
    return absl::UnavailableError(absl::StrCat("cannot commit checkpoint: ", s.error_message()));
  }
  if (!resp.accepted()) {
    return absl::FailedPreconditionError(
        absl::StrCat("weftd refused the checkpoint: ", resp.reason()));
  }
  return absl::OkStatus();
}

absl::StatusOr<Membership> CoordinatorReporter::Regroup(int64_t generation, int64_t step) {
  weft::v1::RegroupRequest req;
  *req.mutable_learner() = Identity();
  req.set_generation(generation);
  req.set_step(step);
  weft::v1::RegroupResponse resp;
  grpc::Status s = Retry([&](Stub& stub) { return stub.Regroup(Context().get(), req, &resp); });
  if (!s.ok()) return absl::UnavailableError(absl::StrCat("cannot regroup: ", s.error_message()));
  Membership m;
  m.kind = resp.decision() == weft::v1::RegroupResponse::REFORM ? Membership::Kind::kReform
           : resp.decision() == weft::v1::RegroupResponse::STOP ? Membership::Kind::kStop
                                                                : Membership::Kind::kWait;
  m.generation = resp.generation();
  m.rank = resp.rank();
  m.world_size = resp.world_size();
  m.rendezvous_host = resp.rendezvous_host();
  m.rendezvous_port = resp.rendezvous_port();
  m.reason = resp.reason();
  if (m.kind == Membership::Kind::kReform &&
      (m.world_size < 1 || m.rank < 0 || m.rank >= m.world_size || m.generation <= generation)) {
    return absl::InternalError(absl::StrCat("weftd sent an impossible membership: rank ", m.rank,
                                            " of ", m.world_size, " in generation ", m.generation));
  }
  return m;
}

void CoordinatorReporter::Finish(bool succeeded, const std::string& reason, double best) {
  for (int i = 0; i < 20 && !Flush(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  weft::v1::ReportFinishedRequest req;
  *req.mutable_learner() = Identity();
  req.set_succeeded(succeeded);
  req.set_reason(reason);
  req.set_best_test_accuracy(best);
  weft::v1::ReportFinishedResponse resp;
  grpc::Status s =
      Retry([&](Stub& stub) { return stub.ReportFinished(Context().get(), req, &resp); });
  if (!s.ok()) spdlog::error("could not report the end of training: {}", s.error_message());
}

}  // namespace weft::train
