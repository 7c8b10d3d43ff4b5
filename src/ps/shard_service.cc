#include "ps/shard_service.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "spdlog/spdlog.h"

namespace weft::ps {
namespace {

// How long a Push may wait in the server (ms) before it answers DEADLINE_EXCEEDED and the learner
// pushes again: short enough that a learner sees a shutdown or a lost peer soon.
constexpr int64_t kPushWaitMs = 2'000;

grpc::Status ToGrpc(const absl::Status& s) {
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

std::string FloatsToBytes(const std::vector<float>& v) {
  return {reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)};
}

// InvalidArgument unless `bytes` holds exactly `n` floats.
grpc::Status BytesToFloats(const std::string& bytes, size_t n, const char* what,
                           std::vector<float>* out) {
  if (bytes.size() != n * sizeof(float)) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            absl::StrCat(what, " holds ", bytes.size(), " bytes; expected ", n * sizeof(float))};
  }
  out->resize(n);
  std::memcpy(out->data(), bytes.data(), bytes.size());
  return grpc::Status::OK;
}

void StatsToProto(const ApplierStats& stats, v1::ParameterServerStats* s) {
  s->set_versions(stats.version);
  s->set_gradients_applied(stats.gradients_applied);
  s->set_discarded_non_finite(stats.discarded_non_finite);
  for (uint64_t b : stats.staleness) s->add_staleness(b);
}

absl::StatusOr<ServerConfig> ConfigFrom(const v1::PsInitRequest& r, int64_t num_params) {
  ServerConfig c;
  c.num_slots = r.learners();
  c.num_params = num_params;
  if (r.consistency() < 0 || r.consistency() > 2) {
    return absl::InvalidArgumentError("consistency must be 0 (bsp), 1 (asp) or 2 (ssp)");
  }
  c.consistency = static_cast<Consistency>(r.consistency());
  c.staleness = r.staleness();
  if (r.lease_ms() > 0) c.lease_ms = r.lease_ms();
  if (r.optimizer() < 0 || r.optimizer() > 1) {
    return absl::InvalidArgumentError("optimizer must be 0 (sgd) or 1 (adam)");
  }
  c.optimizer.kind = static_cast<OptimizerKind>(r.optimizer());
  c.optimizer.learning_rate = r.learning_rate();
  c.optimizer.momentum = r.momentum();
  c.optimizer.weight_decay = r.weight_decay();
  c.optimizer.beta1 = r.beta1();
  c.optimizer.beta2 = r.beta2();
  c.optimizer.eps = r.eps();
  return c;
}

}  // namespace

ShardService::ShardService(std::string job_id, std::string credential,
                           std::function<void()> on_shutdown)
    : job_id_(std::move(job_id)),
      credential_(std::move(credential)),
      on_shutdown_(std::move(on_shutdown)) {}

std::shared_ptr<Shard> ShardService::shard() {
  absl::MutexLock lock(&mu_);
  return shard_;
}

bool ShardService::CredentialMatches(const std::string& given) const {
  if (given.size() != credential_.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < given.size(); ++i) {
    diff |= static_cast<unsigned char>(given[i] ^ credential_[i]);
  }
  return diff == 0;
}

grpc::Status ShardService::Check(const v1::PsCaller& caller, std::shared_ptr<Shard>* shard) {
  if (credential_.empty() || !CredentialMatches(caller.credential())) {
    return {grpc::StatusCode::UNAUTHENTICATED, "wrong job credential"};
  }
  if (caller.job_id() != job_id_) {
    return {grpc::StatusCode::FAILED_PRECONDITION, "this server belongs to another job"};
  }
  absl::MutexLock lock(&mu_);
  if (shard_ == nullptr) {
    return {grpc::StatusCode::UNAVAILABLE, "the shard is not initialized yet"};
  }
  if (caller.attempt() != attempt_) {
    return {grpc::StatusCode::FAILED_PRECONDITION,
            absl::StrCat("this server belongs to attempt ", attempt_, ", not ", caller.attempt())};
  }
  *shard = shard_;
  return grpc::Status::OK;
}

grpc::Status ShardService::Init(grpc::ServerContext*, const v1::PsInitRequest* request,
                                v1::PsInitResponse*) {
  const v1::PsCaller& caller = request->caller();
  if (credential_.empty() || !CredentialMatches(caller.credential())) {
    return {grpc::StatusCode::UNAUTHENTICATED, "wrong job credential"};
  }
  if (caller.job_id() != job_id_) {
    return {grpc::StatusCode::FAILED_PRECONDITION, "this server belongs to another job"};
  }
  if (caller.learner() != 0) {
    return {grpc::StatusCode::PERMISSION_DENIED, "only rank 0 initializes the servers"};
  }
  const int64_t n = static_cast<int64_t>(request->params().size() / sizeof(float));
  absl::StatusOr<ServerConfig> config = ConfigFrom(*request, n);
  if (!config.ok()) return ToGrpc(config.status());
  ServerState state;
  state.version = request->version();
  if (grpc::Status s =
          BytesToFloats(request->params(), static_cast<size_t>(n), "params", &state.params);
      !s.ok()) {
    return s;
  }
  if (!request->optimizer_state().empty()) {
    const size_t floats = static_cast<size_t>(n) * StateFloatsPerParam(config->optimizer);
    if (grpc::Status s = BytesToFloats(request->optimizer_state(), floats, "optimizer_state",
                                       &state.optimizer_state);
        !s.ok()) {
      return s;
    }
  }
  state.positions.assign(request->applied().begin(), request->applied().end());
  absl::MutexLock lock(&mu_);
  if (shard_ != nullptr) {
    return {grpc::StatusCode::ALREADY_EXISTS,
            absl::StrCat("initialized already, for attempt ", attempt_)};
  }
  absl::StatusOr<std::unique_ptr<Shard>> shard = Shard::Create(*config, std::move(state));
  if (!shard.ok()) return ToGrpc(shard.status());
  shard_ = std::move(*shard);
  attempt_ = caller.attempt();
  begin_ = request->begin();
  spdlog::info("shard {} of {}: keys [{}, {}), {} learners, attempt {}, version {}",
               request->shard(), request->shards(), begin_, begin_ + n, request->learners(),
               attempt_, request->version());
  return grpc::Status::OK;
}

grpc::Status ShardService::Pull(grpc::ServerContext*, const v1::PsPullRequest* request,
                                v1::PsPullResponse* response) {
  std::shared_ptr<Shard> shard;
  if (grpc::Status s = Check(request->caller(), &shard); !s.ok()) return s;
  std::string* bytes = response->mutable_params();
  bytes->resize(static_cast<size_t>(shard->num_params()) * sizeof(float));
  int64_t applied = 0;
  absl::StatusOr<uint64_t> version =
      shard->Pull(request->caller().learner(), reinterpret_cast<float*>(bytes->data()), &applied);
  if (!version.ok()) return ToGrpc(version.status());
  response->set_version(*version);
  response->set_applied(applied);
  absl::MutexLock lock(&mu_);
  response->set_begin(begin_);
  return grpc::Status::OK;
}

grpc::Status ShardService::Push(grpc::ServerContext*, const v1::PsPushRequest* request,
                                v1::PsPushResponse* response) {
  std::shared_ptr<Shard> shard;
  if (grpc::Status s = Check(request->caller(), &shard); !s.ok()) return s;
  std::vector<float> grad;
  if (grpc::Status s = BytesToFloats(request->gradient(), static_cast<size_t>(shard->num_params()),
                                     "gradient", &grad);
      !s.ok()) {
    return s;
  }
  const int learner = request->caller().learner();
  absl::StatusOr<PushResult> r = shard->Push(learner, request->seq(), request->base_version(),
                                             grad.data(), request->non_finite(), kPushWaitMs);
  if (!r.ok()) return ToGrpc(r.status());
  if (drop_ack_ && drop_ack_(learner, request->seq())) {
    return {grpc::StatusCode::UNAVAILABLE, "acknowledgement dropped (fault injection)"};
  }
  response->set_version(r->version);
  response->set_duplicate(r->duplicate);
  response->set_discarded(r->discarded);
  return grpc::Status::OK;
}

grpc::Status ShardService::Done(grpc::ServerContext*, const v1::PsDoneRequest* request,
                                v1::PsDoneResponse*) {
  std::shared_ptr<Shard> shard;
  if (grpc::Status s = Check(request->caller(), &shard); !s.ok()) return s;
  return ToGrpc(shard->Done(request->caller().learner()));
}

grpc::Status ShardService::Snapshot(grpc::ServerContext*, const v1::PsSnapshotRequest* request,
                                    v1::PsSnapshotResponse* response) {
  std::shared_ptr<Shard> shard;
  if (grpc::Status s = Check(request->caller(), &shard); !s.ok()) return s;
  ApplierStats stats;
  uint64_t duplicates = 0;
  ServerState state = shard->Snapshot(&stats, &duplicates);
  response->set_version(state.version);
  response->set_params(FloatsToBytes(state.params));
  response->set_optimizer_state(FloatsToBytes(state.optimizer_state));
  for (int64_t p : state.positions) response->add_applied(p);
  StatsToProto(stats, response->mutable_stats());
  response->set_duplicates(duplicates);
  return grpc::Status::OK;
}

grpc::Status ShardService::Progress(grpc::ServerContext*, const v1::PsProgressRequest* request,
                                    v1::PsProgressResponse* response) {
  std::shared_ptr<Shard> shard;
  if (grpc::Status s = Check(request->caller(), &shard); !s.ok()) return s;
  ApplierStats stats;
  uint64_t version = 0;
  for (int64_t p : shard->Progress(&version, &stats)) response->add_applied(p);
  response->set_version(version);
  StatsToProto(stats, response->mutable_stats());
  return grpc::Status::OK;
}

grpc::Status ShardService::Shutdown(grpc::ServerContext*, const v1::PsShutdownRequest* request,
                                    v1::PsShutdownResponse*) {
  std::shared_ptr<Shard> shard;
  grpc::Status s = Check(request->caller(), &shard);
  // A server rank 0 never initialized (it failed first) may be shut down too.
  if (!s.ok() && s.error_code() != grpc::StatusCode::UNAVAILABLE) return s;
  if (request->caller().learner() != 0) {
    return {grpc::StatusCode::PERMISSION_DENIED, "only rank 0 shuts the servers down"};
  }
  if (shard != nullptr) shard->Close();
  if (on_shutdown_) on_shutdown_();
  return grpc::Status::OK;
}

absl::Status ServeShard(const ShardServerOptions& options, const std::atomic<bool>* stop) {
  const std::string& job_id = options.job_id;
  const int64_t drop_ack_every = options.drop_ack_every;
  std::atomic<bool> shutdown{false};
  ShardService service(job_id, options.credential, [&shutdown] { shutdown = true; });
  std::atomic<int64_t> taken{0};
  if (drop_ack_every > 0) {
    spdlog::warn("fault injection: the acknowledgement of every {}th push is dropped",
                 drop_ack_every);
    service.set_drop_ack(
        [&taken, drop_ack_every](int, int64_t) { return ++taken % drop_ack_every == 0; });
  }
  grpc::ServerBuilder builder;
  int port = 0;
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (!options.tls.cert_pem.empty()) {
    grpc::SslServerCredentialsOptions tls;
    tls.pem_key_cert_pairs.push_back({options.tls.key_pem, options.tls.cert_pem});
    credentials = grpc::SslServerCredentials(tls);
  }
  builder.AddListeningPort(options.listen, credentials, &port);
  builder.SetMaxReceiveMessageSize(kMaxPsMessageBytes);
  builder.SetMaxSendMessageSize(kMaxPsMessageBytes);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.listen,
                     options.tls.cert_pem.empty() ? "" : " (or the TLS identity does not load)"));
  }
  spdlog::info("weft-ps for job {} listening on port {}{}", job_id, port,
               options.tls.cert_pem.empty() ? "" : " over TLS");
  // Asked to stop (weftd preempts or halts the job, and stops the whole gang at once), a server
  // holding a shard serves on until rank 0, which checkpoints from it first, shuts it down; the
  // executor's kill after its grace bounds the wait. One not initialized has nothing to keep.
  bool told = false;
  while (!shutdown) {
    if (stop != nullptr && *stop) {
      if (service.shard() == nullptr) break;
      if (!told) {
        spdlog::info("asked to stop: serving on until rank 0 has checkpointed and shuts it down");
        told = true;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (std::shared_ptr<Shard> shard = service.shard(); shard != nullptr) {
    shard->Close();
    ApplierStats stats;
    uint64_t duplicates = 0;
    ServerState state = shard->Snapshot(&stats, &duplicates);
    spdlog::info(
        "shard account: version {}, {} versions applied here, {} gradients applied, {} discarded "
        "as non-finite, {} duplicates acknowledged; positions [{}]",
        state.version, stats.version, stats.gradients_applied, stats.discarded_non_finite,
        duplicates, absl::StrJoin(state.positions, ", "));
  }
  // Calls still in flight (a push waiting for its bsp round) are cancelled after 200 ms.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  return absl::OkStatus();
}

}  // namespace weft::ps
