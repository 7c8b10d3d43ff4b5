// weftd from its checked flags to a running service (daemon/daemon.h).
#include "daemon/daemon.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/rest_server.h"
#include "common/env.h"
#include "common/files.h"
#include "common/ids.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "control/controller.h"
#include "control/coordinator_service.h"
#include "control/experiment_controller.h"
#include "control/images.h"
#include "control/tenancy.h"
#include "daemon/backends.h"
#include "daemon/flags.h"
#include "daemon/leader.h"
#include "job/layout.h"
#include "scheduler/policies.h"

namespace weft::daemon {
namespace {

// How often the experiments' searches are driven when nothing wakes them sooner (a trial's job
// ending its rung does: ExperimentController::StartRounds).
constexpr int64_t kExperimentRoundMs = 1000;

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

// The policy `name` names (checked by the flag), with a warning when it does not enforce the
// quotas some tenant of `store` has.
absl::StatusOr<std::unique_ptr<weft::scheduler::Policy>> SchedulingPolicy(const std::string& name,
                                                                          weft::Store& store) {
  auto policy = weft::scheduler::MakePolicy(name);
  if (!policy.ok() || name == "fairshare" || name == "targets") return policy;
  auto tenants = store.ListTenants();
  if (tenants.ok() && std::any_of(tenants->begin(), tenants->end(),
                                  [](const weft::TenantRecord& t) { return t.has_quota; })) {
    spdlog::warn(
        "policy {} does not enforce tenants' quotas; tenants with a quota may run over "
        "it (fairshare and targets enforce them)",
        name);
  }
  return policy;
}

// {address} when it is on the host of `listen` (host:port), else none: a dead leader's
// coordinator address this weftd may take over for the learners that only know that one.
std::vector<std::string> SameHost(const std::string& address, const std::string& listen) {
  if (address.empty() || HostOf(address) != HostOf(listen)) return {};
  return {address};
}

// The data directory made, canonical and, with `lock`, locked for this weftd (one weftd per
// directory; the lock is held until the process exits). Unlocked with a PostgreSQL store: weftd
// in active/standby share the directory, and the store's lease decides who writes.
absl::StatusOr<std::string> LockDataDir(weft::Env& env, const std::string& dir, bool lock) {
  if (auto s = env.MakeDirs(weft::JobLayout(dir).JobsDir()); !s.ok()) return s;
  std::string data_dir = std::filesystem::canonical(dir).string();
  if (!lock) return data_dir;
  int lock_fd = open((data_dir + "/weftd.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd < 0 || flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("another weftd is using ", data_dir));
  }
  return data_dir;
}

// Where a weftd keeps its coordinator's address: one file per data directory, or per member
// when weftd in active/standby share it.
std::string CoordinatorAddressFile(const std::string& data_dir, const Flags& flags) {
  if (flags.store == "sqlite") return data_dir + "/coordinator.addr";
  std::string name = flags.name;
  std::replace(name.begin(), name.end(), ':', '_');
  return absl::StrCat(data_dir, "/coordinator-", name, ".addr");
}

// The coordinator's gRPC server. Learners that outlive a weftd keep dialling its address, so
// with port 0 asked for, the address of the previous weftd on this data directory is reused;
// it also listens on `also` where it can (a dead leader's address, after a takeover).
absl::StatusOr<std::unique_ptr<weft::GrpcServer>> StartCoordinator(weft::Env& env,
                                                                   const std::string& data_dir,
                                                                   const Flags& flags,
                                                                   grpc::Service* service,
                                                                   std::vector<std::string> also) {
  const std::string& listen = flags.coordinator_listen;
  std::string cert, key;  // PEM; empty: plain text
  if (!flags.tls_cert.empty()) {
    ASSIGN_OR_RETURN(cert, env.ReadFile(flags.tls_cert));
    ASSIGN_OR_RETURN(key, env.ReadFile(flags.tls_key));
  }
  const std::string addr_file = CoordinatorAddressFile(data_dir, flags);
  absl::StatusOr<std::unique_ptr<weft::GrpcServer>> server = absl::UnavailableError("not started");
  auto previous = env.ReadFile(addr_file);
  const std::string previous_address =
      previous.ok() ? std::string(absl::StripAsciiWhitespace(*previous)) : "";
  // Only on the host asked for now: an address saved under another --coordinator-listen is stale.
  // Nor one the REST API is to listen on: a killed weftd frees its coordinator's port, and the
  // next free port a supervisor picks for --listen may be that one.
  const bool rest_address = !previous_address.empty() && previous_address == flags.listen;
  if (rest_address) {
    spdlog::warn(
        "previous coordinator address {} is the address of --listen; the coordinator takes "
        "another and learners still running from the previous weftd will be requeued",
        previous_address);
  }
  if (absl::EndsWith(listen, ":0") && !previous_address.empty() && !rest_address &&
      HostOf(previous_address) == HostOf(listen)) {
    server = weft::GrpcServer::Start(previous_address, service, cert, key, also);
    if (!server.ok()) {
      spdlog::warn(
          "previous coordinator address {} is taken; learners still running from the "
          "previous weftd cannot reconnect and their jobs will be requeued",
          *previous);
    }
  }
  if (!server.ok()) server = weft::GrpcServer::Start(listen, service, cert, key, also);
  if (!server.ok()) return server.status();
  if (auto s = weft::WriteFileAtomic(env, addr_file, (*server)->address()); !s.ok()) return s;
  return server;
}

// Prints `s` and returns weftd's exit code for it: 2 for a bad flag or config, 1 otherwise.
int Fail(const absl::Status& s) {
  std::cerr << "error: " << s.message() << "\n";
  return absl::IsInvalidArgument(s) ? 2 : 1;
}

// Everything weftd and its learners create is their owner's alone: the store, secrets, specs,
// logs, checkpoints and models of every tenant share one data directory on a shared host.
// weftd's memory holds the learner key and, in passing, tokens: no core dump of it, and no other
// process of its user may ptrace it or read its /proc files.
void KeepToOwner() {
  umask(077);
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  prctl(PR_SET_DUMPABLE, 0);
}

// SIGINT and SIGTERM set g_stop (Lead and StandBy then shut down); SIGPIPE is ignored.
void HandleSignals() {
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

// The line that says weftd is up, and where and how.
void LogListening(const Flags& flags, const std::string& data_dir, const std::string& store,
                  const std::vector<weft::scheduler::Node>& nodes, const std::string& coordinator,
                  const weft::Executor& executor) {
  double cpus = 0;
  for (const auto& n : nodes) cpus += n.capacity.cpus;
  spdlog::info(
      "listening on {}://{}:{} (data dir {}, store {}, {} node(s), {} cpus, policy {}, learners "
      "in runtime {}{}, report to {}{})",
      flags.tls_cert.empty() ? "http" : "https", flags.host, flags.port, data_dir, store,
      nodes.size(), cpus, flags.policy, executor.Runtime(),
      executor.Available().ok() ? "" : " (CANNOT RUN LEARNERS: jobs are refused)", coordinator,
      flags.tls_cert.empty() ? "" : " over TLS");
}

// What every part of a weftd's life works with once its store is open.
struct Base {
  Flags& flags;
  weft::Env& env;
  std::string data_dir;
  weft::Store& store;
  std::string store_description;
  std::vector<weft::scheduler::Node> nodes;
  std::map<std::string, std::vector<int>> cpusets;
};

weft::ControllerOptions ControllerOptionsFor(const Base& b, const std::string& learner_key) {
  weft::ControllerOptions options;
  options.data_dir = b.data_dir;
  options.learner_key = learner_key;
  options.nodes = b.nodes;
  options.node_cpusets = b.cpusets;
  options.allow_unsandboxed_commands = b.flags.allow_unsandboxed_commands;
  options.disk_check_interval_ms = static_cast<int64_t>(b.flags.disk_check_seconds * 1000);
  options.tenant_max_jobs = b.flags.tenant_max_jobs;
  options.tenant_max_active_jobs = b.flags.tenant_max_active_jobs;
  options.heartbeat_timeout_ms = static_cast<int64_t>(b.flags.heartbeat_timeout_seconds * 1000);
  options.coordinator_ca_path = b.flags.tls_ca.empty() ? b.flags.tls_cert : b.flags.tls_ca;
  options.ps_tls = !b.flags.tls_cert.empty();
  return options;
}

// Tells learners where to report: this weftd's coordinator; with a `keeper` (may be null), every
// member's, the leader's first, again whenever the members change.
void AnnounceCoordinators(LeaseKeeper* keeper, const std::string& self,
                          weft::Controller& controller, weft::CoordinatorService& service) {
  controller.SetCoordinatorAddress(self);
  if (keeper == nullptr) return;
  keeper->SetOnMembers([self, &controller, &service](const std::vector<weft::Member>& members) {
    std::vector<std::string> list = CoordinatorList(self, members);
    controller.SetCoordinatorAddress(absl::StrJoin(list, ","));
    service.SetCoordinators(std::move(list));
  });
}

// The engine tenants' images go to: the one the learners run in (null: none, so no images).
std::unique_ptr<weft::PodmanRuntime> ImageEngine(const weft::Executor& executor,
                                                 const std::string& data_dir) {
  if (executor.Runtime() != "podman" || !executor.Available().ok()) return nullptr;
  auto opened = weft::PodmanRuntime::Open({"/usr/bin/podman", data_dir + "/run/podman"});
  return opened.ok() ? *std::move(opened) : nullptr;
}

// Leads until SIGINT or SIGTERM: tenancy, the executor, recovery, the coordinator, the REST API
// and the control loop. `keeper` renews the lease of a weftd that shares its store (null: the
// only weftd, on SQLite); learners are told every member's coordinator.
int Lead(Base& b, std::unique_ptr<LeaseKeeper> keeper, const std::string& previous_coordinator) {
  Flags& flags = b.flags;
  if (auto s = SetUpTenancy(b.env, b.store, b.data_dir); !s.ok()) return Fail(s);
  auto learner_key = LearnerKey(b.env, b.data_dir);
  if (!learner_key.ok()) return Fail(learner_key.status());
  weft::Artifacts artifacts(b.store, b.env, b.data_dir, weft::SystemClock::Get(),
                            {flags.max_artifact_mb << 20, flags.tenant_artifact_mb << 20});
  if (auto s = artifacts.RemoveUnnamed(); !s.ok()) return Fail(s);
  if (flags.default_datasets) {
    if (auto s = RegisterDebianDatasets(b.store); !s.ok()) return Fail(s);
  }
  // Learners in containers reach the coordinator through their attempt's socket (it outlives
  // the executor, whose attempts close theirs as they end).
  weft::LearnerChannels channels(b.data_dir + "/run/channels");
  auto executor =
      MakeExecutor({flags.executor, flags.learner, flags.slurm_partition, flags.memory_limits,
                    flags.runtime, flags.runtime_image, flags.pids_limit, flags.first_job_uid},
                   b.data_dir, &b.nodes, channels);
  if (!executor.ok()) return Fail(executor.status());
  auto policy = SchedulingPolicy(flags.policy, b.store);
  if (!policy.ok()) return Fail(policy.status());
  weft::ControllerOptions options = ControllerOptionsFor(b, *learner_key);
  options.artifacts = &artifacts;
  weft::DiskQuota disk_quota(b.store, weft::JobLayout(b.data_dir),
                             [&artifacts](const std::string& t) { return artifacts.TenantDir(t); },
                             weft::SystemClock::Get(), {flags.tenant_disk_quota_mb});
  options.disk_quota = &disk_quota;
  std::unique_ptr<weft::PodmanRuntime> engine = ImageEngine(**executor, b.data_dir);
  weft::Images images(b.store, engine.get(), &artifacts, &disk_quota, weft::SystemClock::Get(),
                      weft::Sha256Hex(std::filesystem::absolute(b.data_dir).string()).substr(0, 8));
  if (int n = images.RemoveUnreferenced(flags.runtime_image); n > 0) {
    spdlog::info("removed {} images no registration names any more", n);
  }
  options.images = &images;
  weft::Controller controller(b.store, **executor, **policy, weft::SystemClock::Get(), options,
                              b.env);
  weft::CoordinatorService service(controller, controller.credentials(),
                                   static_cast<int>(options.heartbeat_interval_ms), &channels,
                                   flags.metric_points);
  auto grpc_server = StartCoordinator(b.env, b.data_dir, flags, &service,
                                      SameHost(previous_coordinator, flags.coordinator_listen));
  if (!grpc_server.ok()) return Fail(grpc_server.status());
  channels.Serve((*grpc_server)->server());
  const std::string self = (*grpc_server)->address();
  for (const std::string& a : (*grpc_server)->also()) {
    spdlog::info("also serving learners on {}, the previous leader's coordinator address", a);
  }
  AnnounceCoordinators(keeper.get(), self, controller, service);
  if (auto s = controller.Recover(); !s.ok()) {
    return Fail(absl::InternalError(absl::StrCat("recovery failed: ", s.message())));
  }
  weft::ExperimentController experiments(
      b.store, controller, weft::SystemClock::Get(),
      {flags.tenant_max_experiments, flags.tenant_max_running_experiments});
  flags.rest.admin_token_path = b.data_dir + "/admin.token";
  weft::api::RestServer rest(b.store, controller,
                             {&artifacts, &disk_quota, &images, executor->get(), &experiments},
                             weft::SystemClock::Get(), flags.rest);
  if (auto s = rest.Start(flags.host, flags.port); !s.ok()) return Fail(s);
  controller.StartLoop();
  // The experiments' searches, on their own thread: a round reads each running experiment's
  // trials and acts on them through the controller.
  experiments.StartRounds(kExperimentRoundMs);
  // Deliveries the outbox holds from before a restart go out now.
  weft::WebhookDispatcher webhooks(b.store, weft::SystemClock::Get(), flags.rest.webhooks);
  webhooks.Start();
  LogListening(flags, b.data_dir, b.store_description, b.nodes, self, **executor);
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  spdlog::info("shutting down");
  if (keeper) keeper->SetOnMembers(nullptr);  // no more calls into the controller
  rest.Stop();
  webhooks.Stop();
  experiments.StopRounds();
  controller.StopLoop();
  channels.Serve(nullptr);
  (*grpc_server)->Shutdown();
  if (keeper) keeper->Release();
  return 0;
}

// This weftd's REST API address as its peers and clients reach it.
std::string ApiAddress(const Flags& flags) {
  std::string host = flags.host;
  if (host == "0.0.0.0" || host == "::" || host == "[::]") {
    host = DefaultMemberName(0);
    host = host.substr(0, host.rfind(':'));
  }
  return absl::StrCat(flags.tls_cert.empty() ? "http" : "https", "://", host, ":", flags.port);
}

// Stands by — the REST API redirecting to the leader, `coordinator` refusing learners — until
// this weftd takes the lease (returned) or SIGINT/SIGTERM (nullopt). Unavailable if the API's
// port cannot be bound.
absl::StatusOr<std::optional<weft::Lease>> StandBy(const Base& b, weft::Leadership& election,
                                                   const weft::Member& me, int64_t ttl_ms,
                                                   weft::StandbyCoordinatorService& coordinator) {
  ASSIGN_OR_RETURN(
      auto api, StandbyApi::Start(b.flags.host, b.flags.port, b.flags.tls_cert, b.flags.tls_key));
  std::optional<weft::Lease> lease =
      AwaitLease(election, me, ttl_ms, g_stop, [&](const weft::Member& leader) {
        api->SetLeader(leader);
        coordinator.SetMessage(
            leader.name.empty()
                ? "standby; no weftd leads right now"
                : absl::StrCat("standby; the leader is ", leader.name, " at ", leader.coordinator));
      });
  api->Stop();
  return lease;
}

// With a store shared by several weftd: takes the lease at once if it is free, else stands by
// until it can; then fences the store at its epoch and leads on the same addresses.
int StandByThenLead(Base& b, weft::Leadership& election) {
  const int64_t ttl_ms = static_cast<int64_t>(b.flags.lease_seconds * 1000);
  weft::Member me{b.flags.name, ApiAddress(b.flags), ""};
  weft::StandbyCoordinatorService standby_coordinator;
  auto grpc_server = StartCoordinator(b.env, b.data_dir, b.flags, &standby_coordinator, {});
  if (!grpc_server.ok()) return Fail(grpc_server.status());
  me.coordinator = (*grpc_server)->address();
  // Campaign once before serving anything: a weftd that leads at once never answers as a standby.
  absl::StatusOr<weft::Lease> first = election.Campaign(me, 0, ttl_ms);
  if (!first.ok()) return Fail(first.status());
  std::optional<weft::Lease> lease;
  if (first->held) {
    spdlog::info("this weftd ({}) leads, at epoch {}", me.name, first->epoch);
    lease = *first;
  } else {
    auto waited = StandBy(b, election, me, ttl_ms, standby_coordinator);
    if (!waited.ok()) return Fail(waited.status());
    lease = *waited;
  }
  // Its calls are refusals: cancel any in flight (learners call again) rather than wait.
  (*grpc_server)->Shutdown(std::chrono::milliseconds(0));
  if (!lease) return 0;
  election.Fence(lease->epoch, ttl_ms, [epoch = lease->epoch](int64_t now) {
    ExitDeposed(absl::StrCat("this weftd no longer leads: a store write found leader epoch ", now,
                             ", this weftd led at epoch ", epoch));
  });
  // The learners that know only the previous leader's coordinator reach this one there, when
  // it was on this host (and so is free now, it being dead).
  std::string previous = lease->last_holder.coordinator;
  if (previous == me.coordinator) previous.clear();
  return Lead(b, std::make_unique<LeaseKeeper>(election, me, *lease, ttl_ms), previous);
}

}  // namespace

int Run(Flags flags) {
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ weftd: %v");
  KeepToOwner();
  if (auto s = CheckFlags(flags); !s.ok()) return Fail(s);
  std::vector<weft::scheduler::Node> nodes = {ThisHost()};
  std::map<std::string, std::vector<int>> cpusets;
  if (!flags.config.empty()) {
    auto n = ReadNodes(flags.config, &cpusets);
    if (!n.ok()) return Fail(n.status());
    nodes = *n;
  }
  for (const weft::scheduler::Node& n : nodes) {
    const auto unnamed = std::count_if(n.gpu_devices.begin(), n.gpu_devices.end(),
                                       [](const auto& g) { return g.cdi.empty(); });
    if (unnamed > 0 && flags.executor == "local" && flags.runtime != "none") {
      spdlog::warn(
          "node {}: {} of its GPUs have no CDI device name, so no container can be given "
          "them: a job placed on them fails to start (list them as gpus: [{{index, "
          "cdi}}])",
          n.name, unnamed);
    }
  }
  // Every file weftd writes that matters goes through one Env (common/env.h).
  weft::Env& env = weft::Env::Default();
  auto data_dir = LockDataDir(env, flags.data_dir, flags.store == "sqlite");
  if (!data_dir.ok()) return Fail(data_dir.status());
  std::string store_description;
  weft::Leadership* election = nullptr;
  auto store =
      OpenStore(flags.store, flags.max_store_bytes, *data_dir, &store_description, &election);
  if (!store.ok()) return Fail(store.status());
  HandleSignals();
  Base base{flags, env, *data_dir, **store, store_description, nodes, cpusets};
  return election != nullptr ? StandByThenLead(base, *election) : Lead(base, nullptr, "");
}

}  // namespace weft::daemon
