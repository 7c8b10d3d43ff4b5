#include "ps/remote_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps/shard_service.h"

namespace weft::ps {
namespace {

// One call's own deadline (ms): a shard's Push waits at most 2 s in the server before it answers.
constexpr int64_t kCallMs = 5'000;
// Pause between two tries of a server that is not there yet, or not initialized (ms).
constexpr int64_t kRetryPauseMs = 20;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void SetDeadline(grpc::ClientContext* context, int64_t ms) {
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(ms));
}

absl::Status FromGrpc(const grpc::Status& s, const std::string& where) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat(where, ": ", s.error_message()));
}

// Worth another try: nothing (or nothing more) was done, or the answer was lost.
bool Retryable(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED;
}

std::string Bytes(const float* v, int64_t n) {
  return {reinterpret_cast<const char*>(v), static_cast<size_t>(n) * sizeof(float)};
}

std::vector<float> Floats(const std::string& bytes) {
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

ApplierStats StatsFrom(const v1::ParameterServerStats& s) {
  ApplierStats out;
  out.version = s.versions();
  out.gradients_applied = s.gradients_applied();
  out.discarded_non_finite = s.discarded_non_finite();
  for (int b = 0; b < s.staleness_size() && b < kStalenessBuckets; ++b) {
    out.staleness[b] = s.staleness(b);
  }
  return out;
}

}  // namespace

std::vector<int64_t> ShardedState::ResumePositions() const {
  std::vector<int64_t> out;
  for (const ServerState& s : shards) {
    if (out.empty()) out = s.positions;
    for (size_t i = 0; i < out.size() && i < s.positions.size(); ++i) {
      out[i] = std::min(out[i], s.positions[i]);
    }
  }
  return out;
}

absl::StatusOr<std::unique_ptr<RemotePsClient>> RemotePsClient::Connect(
    const std::vector<std::string>& addresses, RemoteCaller caller, int64_t num_params,
    const std::string& server_cert_pem) {
  if (addresses.empty()) return absl::InvalidArgumentError("no parameter server addresses");
  if (static_cast<int64_t>(addresses.size()) > num_params) {
    return absl::InvalidArgumentError(absl::StrCat(addresses.size(), " servers for ", num_params,
                                                   " parameters: a shard would be empty"));
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxPsMessageBytes);
  args.SetMaxSendMessageSize(kMaxPsMessageBytes);
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!server_cert_pem.empty()) {
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = server_cert_pem;
    credentials = grpc::SslCredentials(tls);
    args.SetSslTargetNameOverride(kPsTlsName);
  }
  std::vector<std::unique_ptr<v1::ParameterServer::Stub>> stubs;
  for (const std::string& address : addresses) {
    stubs.push_back(
        v1::ParameterServer::NewStub(grpc::CreateCustomChannel(address, credentials, args)));
  }
  return std::unique_ptr<RemotePsClient>(
      new RemotePsClient(std::move(stubs), std::move(caller), num_params));
}

RemotePsClient::RemotePsClient(std::vector<std::unique_ptr<v1::ParameterServer::Stub>> stubs,
                               RemoteCaller caller, int64_t num_params)
    : stubs_(std::move(stubs)), caller_(std::move(caller)) {
  const int k = static_cast<int>(stubs_.size());
  for (int i = 0; i < k; ++i) ranges_.push_back(ShardRange(num_params, k, i));
  versions_.assign(k, 0);
  applied_.assign(k, 0);
}

v1::PsCaller RemotePsClient::Caller() const {
  v1::PsCaller c;
  c.set_job_id(caller_.job_id);
  c.set_attempt(caller_.attempt);
  c.set_credential(caller_.credential);
  c.set_learner(caller_.learner);
  return c;
}

absl::Status RemotePsClient::ForEachShard(const std::function<absl::Status(int)>& call) {
  std::vector<absl::Status> results(stubs_.size());
  std::vector<std::thread> threads;
  for (size_t i = 1; i < stubs_.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = call(static_cast<int>(i)); });
  }
  results[0] = call(0);
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : results) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status RemotePsClient::Init(const ServerConfig& config, const ShardedState& state,
                                  const std::vector<float>& fresh, int64_t timeout_ms) {
  const int k = shards();
  if (!state.shards.empty() && static_cast<int>(state.shards.size()) != k) {
    return absl::InvalidArgumentError(absl::StrCat("the checkpoint holds ", state.shards.size(),
                                                   " shards; the job has ", k, " servers"));
  }
  const int64_t deadline = NowMs() + timeout_ms;
  return ForEachShard([&](int i) -> absl::Status {
    v1::PsInitRequest r;
    *r.mutable_caller() = Caller();
    r.set_shard(i);
    r.set_shards(k);
    r.set_begin(ranges_[i].begin);
    r.set_learners(config.num_slots);
    r.set_consistency(static_cast<int>(config.consistency));
    r.set_staleness(config.staleness);
    r.set_lease_ms(config.lease_ms);
    r.set_optimizer(static_cast<int>(config.optimizer.kind));
    r.set_learning_rate(config.optimizer.learning_rate);
    r.set_momentum(config.optimizer.momentum);
    r.set_weight_decay(config.optimizer.weight_decay);
    r.set_beta1(config.optimizer.beta1);
    r.set_beta2(config.optimizer.beta2);
    r.set_eps(config.optimizer.eps);
    if (state.shards.empty()) {
      r.set_params(Bytes(fresh.data() + ranges_[i].begin, ranges_[i].size()));
    } else {
      const ServerState& s = state.shards[i];
      r.set_version(s.version);
      r.set_params(Bytes(s.params.data(), static_cast<int64_t>(s.params.size())));
      r.set_optimizer_state(
          Bytes(s.optimizer_state.data(), static_cast<int64_t>(s.optimizer_state.size())));
      for (int64_t p : s.positions) r.add_applied(p);
    }
    for (;;) {
      grpc::ClientContext context;
      SetDeadline(&context, kCallMs);
      v1::PsInitResponse response;
      grpc::Status s = stubs_[i]->Init(&context, r, &response);
      if (s.ok() || s.error_code() == grpc::StatusCode::ALREADY_EXISTS) return absl::OkStatus();
      if (!Retryable(s.error_code()) || NowMs() >= deadline) {
        return FromGrpc(s, absl::StrCat("initializing parameter server ", i));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(kRetryPauseMs));
    }
  });
}

absl::StatusOr<uint64_t> RemotePsClient::Pull(float* out, int64_t timeout_ms) {
  const int64_t deadline = NowMs() + timeout_ms;
  absl::Status s = ForEachShard([&](int i) -> absl::Status {
    v1::PsPullRequest r;
    *r.mutable_caller() = Caller();
    for (;;) {
      grpc::ClientContext context;
      SetDeadline(&context, kCallMs);
      v1::PsPullResponse response;
      grpc::Status g = stubs_[i]->Pull(&context, r, &response);
      if (g.ok()) {
        if (response.params().size() != static_cast<size_t>(ranges_[i].size()) * sizeof(float)) {
          return absl::InternalError(absl::StrCat(
              "parameter server ", i, " holds ", response.params().size() / sizeof(float),
              " parameters; its range has ", ranges_[i].size()));
        }
        std::memcpy(out + ranges_[i].begin, response.params().data(), response.params().size());
        versions_[i] = response.version();
        applied_[i] = response.applied();
        return absl::OkStatus();
      }
      if (g.error_code() == grpc::StatusCode::ABORTED) {
        return absl::UnavailableError(absl::StrCat("parameter server ", i, " is shut down"));
      }
      if (!Retryable(g.error_code()) || NowMs() >= deadline) {
        return FromGrpc(g, absl::StrCat("pulling from parameter server ", i));
      }
      if (cancel_ && cancel_()) return absl::CancelledError("stopped while pulling");
      std::this_thread::sleep_for(std::chrono::milliseconds(kRetryPauseMs));
    }
  });
  if (!s.ok()) return s;
  uint64_t sum = 0;
  for (uint64_t v : versions_) sum += v;
  return sum;
}

absl::Status RemotePsClient::PushShard(int i, int64_t seq, const float* grad, bool non_finite,
                                       int64_t timeout_ms) {
  const int64_t deadline = NowMs() + timeout_ms;
  v1::PsPushRequest r;
  *r.mutable_caller() = Caller();
  r.set_seq(seq);
  r.set_base_version(versions_[i]);
  r.set_gradient(Bytes(grad + ranges_[i].begin, ranges_[i].size()));
  r.set_non_finite(non_finite);
  for (;;) {
    grpc::ClientContext context;
    SetDeadline(&context, kCallMs);
    v1::PsPushResponse response;
    grpc::Status g = stubs_[i]->Push(&context, r, &response);
    if (g.ok() && !(drop_ack_ && drop_ack_(i, seq))) return absl::OkStatus();
    if (g.error_code() == grpc::StatusCode::ABORTED) {
      return absl::UnavailableError(absl::StrCat("parameter server ", i, " is shut down"));
    }
    if (!g.ok() && !Retryable(g.error_code())) {
      return FromGrpc(g, absl::StrCat("pushing gradient ", seq, " to parameter server ", i));
    }
    if (NowMs() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "gradient ", seq, " not acknowledged by parameter server ", i, " in ", timeout_ms,
          " ms: ", g.ok() ? "acknowledgement dropped" : g.error_message()));
    }
    if (cancel_ && cancel_()) return absl::CancelledError("stopped while pushing");
    resent_ += 1;
    if (g.error_code() == grpc::StatusCode::UNAVAILABLE) {
      std::this_thread::sleep_for(std::chrono::milliseconds(kRetryPauseMs));
    }
  }
}

absl::Status RemotePsClient::Push(int64_t seq, const float* grad, bool non_finite,
                                  int64_t timeout_ms) {
  return ForEachShard([&](int i) { return PushShard(i, seq, grad, non_finite, timeout_ms); });
}

template <typename Request, typename Response>
absl::Status RemotePsClient::CallEachShard(grpc::Status (v1::ParameterServer::Stub::*method)(
                                               grpc::ClientContext*, const Request&, Response*),
                                           const std::string& what,
                                           std::vector<Response>* responses) {
  responses->assign(stubs_.size(), Response());
  return ForEachShard([&](int i) -> absl::Status {
    Request r;
    *r.mutable_caller() = Caller();
    grpc::ClientContext context;
    SetDeadline(&context, kCallMs);
    grpc::Status g = ((*stubs_[i]).*method)(&context, r, &(*responses)[i]);
    if (g.error_code() == grpc::StatusCode::ABORTED) {
      return absl::UnavailableError(absl::StrCat("parameter server ", i, " is shut down"));
    }
    return g.ok() ? absl::OkStatus() : FromGrpc(g, absl::StrCat(what, "parameter server ", i));
  });
}

absl::Status RemotePsClient::Done() {
  std::vector<v1::PsDoneResponse> responses;
  return CallEachShard(&v1::ParameterServer::Stub::Done, "done at ", &responses);
}

absl::StatusOr<ShardedState> RemotePsClient::Snapshot(ApplierStats* stats, uint64_t* duplicates) {
  std::vector<v1::PsSnapshotResponse> responses;
  RETURN_IF_ERROR(CallEachShard(&v1::ParameterServer::Stub::Snapshot, "snapshot of ", &responses));
  ShardedState out;
  out.shards.resize(responses.size());
  uint64_t dup = 0;
  for (size_t i = 0; i < responses.size(); ++i) {
    const v1::PsSnapshotResponse& r = responses[i];
    out.shards[i].version = r.version();
    out.shards[i].params = Floats(r.params());
    out.shards[i].optimizer_state = Floats(r.optimizer_state());
    out.shards[i].positions.assign(r.applied().begin(), r.applied().end());
    dup += r.duplicates();
  }
  // Every push reaches every shard: shard 0's counters are the job's.
  if (stats != nullptr) *stats = StatsFrom(responses[0].stats());
  if (duplicates != nullptr) *duplicates = dup;
  return out;
}

absl::StatusOr<std::vector<int64_t>> RemotePsClient::Progress(ApplierStats* stats) {
  std::vector<v1::PsProgressResponse> responses;
  RETURN_IF_ERROR(CallEachShard(&v1::ParameterServer::Stub::Progress, "progress of ", &responses));
  std::vector<int64_t> positions(responses[0].applied().begin(), responses[0].applied().end());
  for (const v1::PsProgressResponse& r : responses) {
    for (int l = 0; l < r.applied_size() && l < static_cast<int>(positions.size()); ++l) {
      positions[l] = std::min(positions[l], r.applied(l));
    }
  }
  if (stats != nullptr) *stats = StatsFrom(responses[0].stats());
  return positions;
}

absl::Status RemotePsClient::Shutdown() {
  std::vector<v1::PsShutdownResponse> responses;
  return CallEachShard(&v1::ParameterServer::Stub::Shutdown, "shutting down ", &responses);
}

int64_t RemotePsClient::applied() const {
  return applied_.empty() ? 0 : *std::min_element(applied_.begin(), applied_.end());
}

}  // namespace weft::ps
