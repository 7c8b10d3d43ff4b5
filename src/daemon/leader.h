// weftd among several on one shared store (docs/deploy.md, "Two weftd in active/standby"): one
// leads, the others stand by. A standby serves a REST API that redirects to the leader and a
// coordinator that answers UNAVAILABLE, campaigns for the lease (store/leadership.h) every
// kCampaignMs, and takes over when the leader's lease runs out. The leader renews its lease
// every third of its term; a leader that finds the lease taken, or a write fenced, exits at once
// (learners keep running; the new leader adopts them).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "store/leadership.h"

namespace httplib {
class Server;
}

namespace weft::daemon {

inline constexpr int64_t kCampaignMs = 250;  // how often a standby campaigns
inline constexpr int kDeposedExitCode = 3;   // weftd's exit status when it stops leading

// The name a weftd has among its peers unless --name gives one: "<hostname>:<REST port>".
std::string DefaultMemberName(int port);
// InvalidArgument unless `name` is 1..64 characters of [A-Za-z0-9._:-].
absl::Status CheckMemberName(const std::string& name);

// Ends weftd at once with kDeposedExitCode, saying why: a deposed leader must not act again.
[[noreturn]] void ExitDeposed(const std::string& why);

// The REST API of a standby: every request is redirected (307, Location: the leader's API and
// the same path) to the leader, or answered 503 with Retry-After: 1 while none leads; GET
// /healthz answers 200 {"status": "standby", "leader": API}.
class StandbyApi {
 public:
  // Listens on host:port, with TLS when the PEM paths are given. Unavailable if it cannot bind.
  static absl::StatusOr<std::unique_ptr<StandbyApi>> Start(const std::string& host, int port,
                                                           const std::string& tls_cert,
                                                           const std::string& tls_key);
  ~StandbyApi();
  void SetLeader(const weft::Member& leader);  // name "": none leads now
  void Stop();                                 // frees the port

 private:
  StandbyApi();
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  absl::Mutex mu_;
  weft::Member leader_ ABSL_GUARDED_BY(mu_);
};

// Campaigns every kCampaignMs until this weftd holds the lease (returned) or `stop` is set
// (nullopt). Each time the leader changes, `on_leader(leader)` runs and the change is logged.
// Store errors are logged when they change and retried.
std::optional<weft::Lease> AwaitLease(weft::Leadership& election, const weft::Member& me,
                                      int64_t ttl_ms, const std::atomic<bool>& stop,
                                      const std::function<void(const weft::Member&)>& on_leader);

// Renews a held lease every third of `ttl_ms` on its own thread until destroyed; a renewal that
// finds the lease taken calls ExitDeposed.
class LeaseKeeper {
 public:
  using OnMembers = std::function<void(const std::vector<weft::Member>&)>;
  LeaseKeeper(weft::Leadership& election, weft::Member me, const weft::Lease& lease,
              int64_t ttl_ms);
  ~LeaseKeeper();
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  // `fn(members)` runs now with the members last seen and after each renewal; nullptr stops it.
  void SetOnMembers(OnMembers fn);
  // Stops renewing and lets the lease run out now, so a standby takes over within kCampaignMs:
  // a leader's last act on a planned stop.
  void Release();

 private:
  void Loop();
  weft::Leadership& election_;
  const weft::Member me_;
  const int64_t epoch_;
  const int64_t ttl_ms_;
  absl::Mutex mu_;
  OnMembers on_members_ ABSL_GUARDED_BY(mu_);
  std::vector<weft::Member> members_ ABSL_GUARDED_BY(mu_);
  absl::Notification stop_;
  std::thread thread_;
};

// The coordinator addresses learners are told, this weftd's first, then the other members'.
std::vector<std::string> CoordinatorList(const std::string& self,
                                         const std::vector<weft::Member>& members);

}  // namespace weft::daemon
