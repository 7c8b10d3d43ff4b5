// The two parameter servers behind PsLink: the scale-up segment with rank 0's applier thread, and
// the scale-out weft-ps servers.
#include "train/ps_link.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "ps/segment.h"
#include "ps/shared_client.h"
#include "ps/update.h"

namespace weft::train {
namespace {

constexpr int64_t kAttachPollMs = 50;
// Earlier attempts whose segments rank 0 removes if their rank 0 died before it could.
constexpr int64_t kStaleAttempts = 64;

class SharedMemory final : public PsLink {
 public:
  SharedMemory(const LearnerLaunch& learner, std::string name, int64_t timeout_ms)
      : learner_(learner), name_(std::move(name)), timeout_ms_(timeout_ms) {}
  ~SharedMemory() override { Close(); }

  absl::Status StartServer(const ps::ServerConfig& config, const ps::ShardedState& state,
                           const std::vector<float>& fresh) override {
    for (int64_t a = std::max<int64_t>(1, learner_.attempt - kStaleAttempts); a < learner_.attempt;
         ++a) {
      if (auto stale = ps::SegmentNameForJob(learner_.job_id, a); stale.ok()) {
        if (ps::SharedSegment::Unlink(*stale).ok())
          spdlog::info("removed stale segment {}", *stale);
      }
    }
    if (state.shards.size() > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("the checkpoint holds ", state.shards.size(), " shards; the job has one"));
    }
    if (state.shards.empty()) {
      ASSIGN_OR_RETURN(server_, ps::SharedParameterServer::Create(name_, config, fresh.data()));
    } else {
      ASSIGN_OR_RETURN(server_, ps::SharedParameterServer::Create(name_, config, state.shards[0]));
    }
    applier_ = std::thread([this] { server_->Run(stop_); });
    spdlog::info(
        "parameter server {} in shared memory ({} bytes of parameters), applier thread "
        "started; slot positions [{}]",
        name_, config.num_params * 4, absl::StrJoin(server_->Positions(), ", "));
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> Attach(const std::function<bool()>& stop) override {
    const int64_t deadline = SystemClock::Get().NowMs() + timeout_ms_;
    for (;;) {
      auto client = ps::SharedPsClient::Attach(name_, learner_.rank);
      if (client.ok()) {
        client_ = std::move(*client);
        // A replacement goes on after its predecessor's last published batch (that one is
        // applied: a learner waits for each before the next).
        return client_->start_position() + static_cast<int64_t>(client_->published());
      }
      if (absl::IsFailedPrecondition(client.status()) &&
          absl::StrContains(client.status().message(), "closed")) {
        return -1;
      }
      if (!absl::IsNotFound(client.status()) && !absl::IsUnavailable(client.status())) {
        return client.status();
      }
      if (SystemClock::Get().NowMs() > deadline || stop()) {
        return absl::UnavailableError(absl::StrCat("rank 0 created no parameter server ", name_,
                                                   " within ", timeout_ms_, " ms"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(kAttachPollMs));
    }
  }

  absl::StatusOr<uint64_t> Pull(float* out) override { return client_->Pull(out, timeout_ms_); }

  absl::Status Push(int64_t, const float* grad, uint64_t version) override {
    ASSIGN_OR_RETURN(uint64_t seq, client_->Publish(grad, version, timeout_ms_));
    // Acknowledged: the next gradient is computed on parameters that hold this one (under bsp,
    // this round's version, as after an allreduce step). Without the wait it would be computed
    // without it, one version staler; the applier takes tens of microseconds.
    return client_->WaitApplied(seq, timeout_ms_);
  }

  void Done() override { client_->Done(); }

  std::string SlotSummary() override {
    if (!client_) return "not attached";
    return absl::StrCat(client_->applied(), " gradients of the slot applied (start position ",
                        client_->start_position(), ")");
  }

  absl::StatusOr<std::vector<int64_t>> Positions(ps::ApplierStats* stats) override {
    *stats = server_->Stats();
    return server_->Positions();
  }

  absl::StatusOr<ps::ShardedState> Snapshot() override {
    ps::ShardedState state;
    state.shards.push_back(server_->TakeSnapshot());
    return state;
  }

  void Close() override {
    stop_.store(true);
    if (applier_.joinable()) applier_.join();
    server_.reset();  // closed: the others' next call says so
  }

 private:
  const LearnerLaunch& learner_;
  const std::string name_;
  const int64_t timeout_ms_;
  std::unique_ptr<ps::SharedParameterServer> server_;  // rank 0's
  std::atomic<bool> stop_{false};
  std::thread applier_;
  std::unique_ptr<ps::SharedPsClient> client_;
};

class Remote final : public PsLink {
 public:
  Remote(std::unique_ptr<ps::RemotePsClient> client, int64_t num_params, int64_t timeout_ms)
      : client_(std::move(client)), num_params_(num_params), timeout_ms_(timeout_ms) {}

  absl::Status StartServer(const ps::ServerConfig& config, const ps::ShardedState& state,
                           const std::vector<float>& fresh) override {
    RETURN_IF_ERROR(client_->Init(config, state, fresh, timeout_ms_));
    spdlog::info("parameter servers initialized: {} parameters over {} weft-ps shards",
                 config.num_params, client_->shards());
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> Attach(const std::function<bool()>& stop) override {
    client_->set_cancel(stop);
    std::vector<float> scratch(static_cast<size_t>(num_params_));
    absl::StatusOr<uint64_t> version = client_->Pull(scratch.data(), timeout_ms_);
    if (absl::IsUnavailable(version.status())) return -1;
    RETURN_IF_ERROR(version.status());
    start_ = client_->applied();
    return start_;
  }

  absl::StatusOr<uint64_t> Pull(float* out) override { return client_->Pull(out, timeout_ms_); }

  absl::Status Push(int64_t position, const float* grad, uint64_t) override {
    // Checked whole here: each server sees only its range, and a gradient discarded on one
    // shard must be discarded on all.
    const bool non_finite = !ps::AllFinite(grad, num_params_);
    RETURN_IF_ERROR(client_->Push(position + 1, grad, non_finite, timeout_ms_));
    ++pushed_;
    return absl::OkStatus();
  }

  void Done() override {
    if (absl::Status s = client_->Done(); !s.ok()) spdlog::warn("{}", s.message());
  }

  std::string SlotSummary() override {
    return absl::StrCat(pushed_, " gradients pushed from position ", start_, ", ",
                        client_->resent(), " pushes resent");
  }

  absl::StatusOr<std::vector<int64_t>> Positions(ps::ApplierStats* stats) override {
    return client_->Progress(stats);
  }

  absl::StatusOr<ps::ShardedState> Snapshot() override {
    return client_->Snapshot(nullptr, nullptr);
  }

  void Close() override {
    if (closed_) return;
    closed_ = true;
    if (absl::Status s = client_->Shutdown(); !s.ok()) {
      spdlog::warn("shutting the parameter servers down: {}", s.message());
    }
  }

 private:
  std::unique_ptr<ps::RemotePsClient> client_;
  const int64_t num_params_;
  const int64_t timeout_ms_;
  int64_t start_ = 0;
  uint64_t pushed_ = 0;
  bool closed_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<PsLink>> SharedMemoryLink(const LearnerLaunch& learner,
                                                         int64_t timeout_ms) {
  ASSIGN_OR_RETURN(std::string name, ps::SegmentNameForJob(learner.job_id, learner.attempt));
  return std::unique_ptr<PsLink>(new SharedMemory(learner, std::move(name), timeout_ms));
}

absl::StatusOr<std::unique_ptr<PsLink>> RemoteLink(const LearnerLaunch& learner, int64_t num_params,
                                                   int64_t timeout_ms) {
  ASSIGN_OR_RETURN(std::unique_ptr<ps::RemotePsClient> client,
                   ps::RemotePsClient::Connect(
                       learner.ps_servers,
                       {learner.job_id, learner.attempt, learner.ps_credential, learner.rank},
                       num_params, learner.ps_tls_cert));
  return std::unique_ptr<PsLink>(new Remote(std::move(client), num_params, timeout_ms));
}

}  // namespace weft::train
