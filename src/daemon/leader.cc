#include "daemon/leader.h"

#include <httplib.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "nlohmann/json.hpp"

namespace weft::daemon {
namespace {

void SendJson(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

// The log line for a store error, once per distinct message.
void LogOnce(std::string* last, const absl::Status& s) {
  if (std::string(s.message()) == *last) return;
  *last = std::string(s.message());
  spdlog::warn("cannot campaign for the leader lease: {}; retrying", s.message());
}

}  // namespace

std::string DefaultMemberName(int port) {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) std::snprintf(host, sizeof(host), "weftd");
  return absl::StrCat(host, ":", port);
}

absl::Status CheckMemberName(const std::string& name) {
  const bool ok = !name.empty() && name.size() <= 64 &&
                  std::all_of(name.begin(), name.end(), [](unsigned char c) {
                    return std::isalnum(c) || c == '.' || c == '_' || c == ':' || c == '-';
                  });
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--name must be 1 to 64 characters of letters, digits and . _ : -, got '", name, "'"));
}

void ExitDeposed(const std::string& why) {
  spdlog::critical("{}; this weftd stops now (its learners keep running for the new leader)", why);
  spdlog::default_logger()->flush();
  std::_Exit(kDeposedExitCode);
}

StandbyApi::StandbyApi() = default;

absl::StatusOr<std::unique_ptr<StandbyApi>> StandbyApi::Start(const std::string& host, int port,
                                                              const std::string& tls_cert,
                                                              const std::string& tls_key) {
  std::unique_ptr<StandbyApi> api(new StandbyApi());
  api->server_ = tls_cert.empty()
                     ? std::make_unique<httplib::Server>()
                     : std::make_unique<httplib::SSLServer>(tls_cert.c_str(), tls_key.c_str());
  StandbyApi* self = api.get();
  auto handler = [self](const httplib::Request& req, httplib::Response& res) {
    weft::Member leader;
    {
      absl::MutexLock lock(&self->mu_);
      leader = self->leader_;
    }
    if (req.method == "GET" && req.path == "/healthz") {
      SendJson(res, 200, {{"status", "standby"}, {"leader", leader.api}});
      return;
    }
    if (leader.name.empty() || leader.api.empty()) {
      res.set_header("Retry-After", "1");
      SendJson(res, 503,
               {{"error",
                 "this weftd stands by and no weftd leads right now (a takeover is "
                 "under way); retry in a second"}});
      return;
    }
    res.set_header("Location", leader.api + req.target);
    SendJson(res, 307,
             {{"error", absl::StrCat("this weftd stands by; the leader is ", leader.name, " at ",
                                     leader.api, ": send requests there")},
              {"leader", leader.api}});
  };
  // Answered from the request line and headers alone, before any body is read: a standby
  // buffers nothing a client sends (the client sends the body again to the leader).
  api->server_->set_pre_routing_handler(
      [handler](const httplib::Request& req, httplib::Response& res) {
        handler(req, res);
        return httplib::Server::HandlerResponse::Handled;
      });
  api->server_->set_payload_max_length(64 << 10);
  if (!api->server_->is_valid() || !api->server_->bind_to_port(host.c_str(), port)) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", host, ":", port,
                                               " (in use? try --listen with another port)"));
  }
  api->thread_ = std::thread([self] { self->server_->listen_after_bind(); });
  // httplib's stop() does nothing until the server runs: wait, so Stop() always frees the port.
  while (!api->server_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return api;
}

StandbyApi::~StandbyApi() { Stop(); }

void StandbyApi::SetLeader(const weft::Member& leader) {
  absl::MutexLock lock(&mu_);
  leader_ = leader;
}

void StandbyApi::Stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

std::optional<weft::Lease> AwaitLease(weft::Leadership& election, const weft::Member& me,
                                      int64_t ttl_ms, const std::atomic<bool>& stop,
                                      const std::function<void(const weft::Member&)>& on_leader) {
  std::string last_error;
  std::optional<std::string> last_leader;
  while (!stop) {
    absl::StatusOr<weft::Lease> lease = election.Campaign(me, 0, ttl_ms);
    if (!lease.ok()) {
      LogOnce(&last_error, lease.status());
    } else if (lease->held) {
      spdlog::info("this weftd ({}) leads, at epoch {}", me.name, lease->epoch);
      return *lease;
    } else if (!last_leader || *last_leader != lease->leader.name) {
      last_error.clear();
      last_leader = lease->leader.name;
      if (lease->leader.name.empty()) {
        spdlog::info("standing by; no weftd leads, the lease runs out in {} ms",
                     lease->expires_in_ms);
      } else {
        spdlog::info("standing by; the leader is {} at {} (epoch {})", lease->leader.name,
                     lease->leader.api, lease->epoch);
      }
      on_leader(lease->leader);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(kCampaignMs));
  }
  return std::nullopt;
}

LeaseKeeper::LeaseKeeper(weft::Leadership& election, weft::Member me, const weft::Lease& lease,
                         int64_t ttl_ms)
    : election_(election),
      me_(std::move(me)),
      epoch_(lease.epoch),
      ttl_ms_(ttl_ms),
      members_(lease.members) {
  thread_ = std::thread([this] { Loop(); });
}

void LeaseKeeper::SetOnMembers(OnMembers fn) {
  absl::MutexLock lock(&mu_);
  on_members_ = std::move(fn);
  if (on_members_) on_members_(members_);
}

LeaseKeeper::~LeaseKeeper() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

void LeaseKeeper::Release() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
  absl::StatusOr<weft::Lease> lease = election_.Campaign(me_, epoch_, 0);
  if (lease.ok() && lease->held) spdlog::info("released the leader lease");
}

void LeaseKeeper::Loop() {
  std::string last_error;
  while (!stop_.WaitForNotificationWithTimeout(absl::Milliseconds(ttl_ms_ / 3))) {
    absl::StatusOr<weft::Lease> lease = election_.Campaign(me_, epoch_, ttl_ms_);
    if (!lease.ok()) {
      LogOnce(&last_error, lease.status());
      continue;
    }
    if (!lease->held) {
      ExitDeposed(absl::StrCat(
          "this weftd (", me_.name, ", epoch ", epoch_, ") no longer leads: ",
          lease->leader.name.empty() ? std::string("another weftd") : lease->leader.name,
          " took over at epoch ", lease->epoch));
    }
    last_error.clear();
    absl::MutexLock lock(&mu_);
    members_ = lease->members;
    if (on_members_) on_members_(members_);
  }
}

std::vector<std::string> CoordinatorList(const std::string& self,
                                         const std::vector<weft::Member>& members) {
  std::vector<std::string> out = {self};
  for (const weft::Member& m : members) {
    if (!m.coordinator.empty() && m.coordinator != self) out.push_back(m.coordinator);
  }
  return out;
}

}  // namespace weft::daemon
