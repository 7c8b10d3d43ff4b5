// weftd: the weft control-plane daemon (REST API, store, scheduler, executor, coordinator).
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
#include "api/auth.h"
#include "api/rest_server.h"
#include "common/env.h"
#include "common/files.h"
#include "common/ids.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "control/controller.h"
#include "control/coordinator_service.h"
#include "job/layout.h"
#include "scheduler/policies.h"
#include "weftd_backends.h"
#include "weftd_leader.h"

namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

std::string SelfDir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  buf[n] = 0;
  return std::filesystem::path(buf).parent_path().string();
}

// The command line, parsed and checked.
struct Flags {
  std::string data_dir = "./weft-data";
  std::string listen = "127.0.0.1:8470";
  std::string coordinator_listen = "127.0.0.1:0";
  std::string config;
  std::string learner = SelfDir() + "/weft-learner";
  std::string policy = "fairshare";
  std::string store = "sqlite";  // or a PostgreSQL connection URI
  std::string executor = "local";
  std::string slurm_partition;
  std::string name;  // among the weftd sharing a PostgreSQL store; default host:port
  double lease_seconds = 3;
  weft::api::RestOptions rest;
  bool default_datasets = true;
  bool insecure = false;
  bool allow_unsandboxed_commands = false;
  int64_t max_store_bytes = 0;
  int64_t max_artifact_mb = 256;
  int64_t tenant_artifact_mb = 2048;
  int64_t tenant_disk_quota_mb = 20480;
  double disk_check_seconds = 10;
  double heartbeat_timeout_seconds = 60;
  std::string memory_limits = "auto";     // auto | cgroup | watchdog
  std::string tls_cert, tls_key, tls_ca;  // PEM files; absolute once checked
  std::string host;                       // of --listen
  int port = 0;
};

void AddLimitFlags(CLI::App& app, Flags& f);
void AddTlsFlags(CLI::App& app, Flags& f);

void AddFlags(CLI::App& app, Flags& f) {
  app.add_option("--data-dir", f.data_dir, "directory for the store, jobs, logs and models")
      ->capture_default_str();
  app.add_option("--listen", f.listen, "REST API address host:port")->capture_default_str();
  app.add_option("--coordinator-listen", f.coordinator_listen,
                 "gRPC address for learners (port 0 picks a free one)")
      ->capture_default_str();
  app.add_option("--config", f.config,
                 "YAML file listing the cluster's nodes (default: this host; not with --executor "
                 "slurm, whose nodes are Slurm's)");
  app.add_option("--executor", f.executor,
                 "where learners run: local (processes on this host) or slurm (one Slurm batch job "
                 "per learner on the node weft chose; the nodes come from sinfo; Slurm's commands "
                 "read SLURM_CONF as usual; docs/deploy.md)")
      ->check(CLI::IsMember({"local", "slurm"}))
      ->capture_default_str();
  app.add_option("--slurm-partition", f.slurm_partition,
                 "the Slurm partition whose nodes weft schedules on (default: every node, jobs go "
                 "to the default partition)");
  app.add_option("--learner", f.learner, "path of the weft-learner binary")->capture_default_str();
  app.add_option("--policy", f.policy,
                 "scheduling policy: fairshare | targets | goodput | tiresias | optimus | fifo "
                 "(docs/operations.md; only fairshare and targets enforce tenants' quotas)")
      ->check(CLI::IsMember(weft::scheduler::PolicyNames()))
      ->capture_default_str();
  app.add_option("--max-request-bytes", f.rest.max_request_bytes,
                 "largest request body the REST API accepts; larger ones get 413")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1024}, size_t{1} << 30));
  app.add_flag("!--no-default-datasets", f.default_datasets,
               "do not register Debian's fashion-mnist and mnist for every tenant at start");
  app.add_option("--tenant-requests-per-second", f.rest.tenant_rate.requests_per_second,
                 "each tenant's sustained REST request rate; over it 429 (0: no limit)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--tenant-burst", f.rest.tenant_rate.burst,
                 "requests a tenant may send at once above its rate")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1e6));
  app.add_option("--follow-streams-per-tenant", f.rest.follow_streams_per_tenant,
                 "streams (weft logs -f, event streams, weft follow) a tenant may hold open at "
                 "once; over it 429")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--webhook-allow", f.rest.webhooks.allowed_hosts,
                 "hosts tenants' webhook receivers may be on, comma-separated (names or IP "
                 "literals, compared exactly); anything else is refused at registration")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--store", f.store,
                 "where jobs, tenants and tokens are kept: sqlite (DATA_DIR/weft.db) or a "
                 "PostgreSQL connection URI, postgresql://USER@HOST:PORT/DB (docs/deploy.md; give "
                 "the password in PGPASSWORD or ~/.pgpass, not here, where ps shows it)")
      ->capture_default_str();
  app.add_option("--name", f.name,
                 "this weftd's name among those sharing a PostgreSQL store (default "
                 "HOSTNAME:PORT of --listen; unique among them)");
  app.add_option("--lease-seconds", f.lease_seconds,
                 "with a PostgreSQL store: the leader's lease; a standby takes over this long "
                 "after the leader last renewed it (docs/deploy.md)")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 60.0));
  app.add_option("--max-store-bytes", f.max_store_bytes,
                 "cap on the SQLite store's size (0: the disk's); past it, writes get 507 as on a "
                 "full disk")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 50));
  AddLimitFlags(app, f);
}

// The flags that bound what tenants may take: uploads, disk, memory, and how commands run.
void AddLimitFlags(CLI::App& app, Flags& f) {
  app.add_option("--max-artifact-mb", f.max_artifact_mb,
                 "largest file a tenant may upload (POST /v1/artifacts), MiB; larger ones get 413")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--tenant-artifact-mb", f.tenant_artifact_mb,
                 "room each tenant's uploaded artifacts may take together, MiB; past it 413")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  app.add_option("--tenant-disk-quota-mb", f.tenant_disk_quota_mb,
                 "disk a tenant's jobs' files and artifacts may take together, MiB, unless the "
                 "admin set the tenant's own (disk_quota_mb); at it, submissions and uploads get "
                 "507 and its active jobs are halted (0: no quota)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  app.add_option("--disk-check-seconds", f.disk_check_seconds,
                 "how often the disk use of tenants with active jobs is measured")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--heartbeat-timeout-seconds", f.heartbeat_timeout_seconds,
                 "a running learner silent this long is lost (learners report every second): an "
                 "elastic job's is killed and the others go on, any other job's gang restarts")
      ->capture_default_str()
      ->check(CLI::Range(3.0, 3600.0));
  app.add_option("--memory-limits", f.memory_limits,
                 "how learners are held to resources.memory_mb: cgroup (the kernel, a memory "
                 "cgroup per learner; weftd fails to start without one), watchdog (weftd kills a "
                 "learner it sees over), auto (cgroup where the host gives weftd one)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "cgroup", "watchdog"}));
  app.add_flag("--allow-unsandboxed-commands", f.allow_unsandboxed_commands,
               "run a command job's program without the sandbox (bubblewrap) where it cannot be "
               "set up, instead of failing the job: the program then sees what this weftd's user "
               "sees");
  AddTlsFlags(app, f);
}

// TLS for the REST API and the coordinator, and leaving loopback.
void AddTlsFlags(CLI::App& app, Flags& f) {
  app.add_option("--tls-cert", f.tls_cert,
                 "PEM certificate chain: the REST API speaks HTTPS and the coordinator TLS with it "
                 "(its names must match the hosts clients and learners dial)");
  app.add_option("--tls-key", f.tls_key, "PEM private key of --tls-cert");
  app.add_option("--tls-ca", f.tls_ca,
                 "PEM certificates learners verify the coordinator by (default: --tls-cert itself, "
                 "for a self-signed certificate)");
  app.add_flag("--insecure", f.insecure,
               "allow --listen and --coordinator-listen off loopback, in plain text (tokens and "
               "learner credentials cross the network unencrypted)");
}

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

// The host of "host:port" ("" if there is no colon).
std::string HostOf(const std::string& address) {
  auto colon = address.rfind(':');
  return colon == std::string::npos ? "" : address.substr(0, colon);
}

bool IsLoopback(const std::string& host) {
  return absl::StartsWith(host, "127.") || host == "localhost" || host == "::1" || host == "[::1]";
}

// {address} when it is on the host of `listen` (host:port), else none: a dead leader's
// coordinator address this weftd may take over for the learners that only know that one.
std::vector<std::string> SameHost(const std::string& address, const std::string& listen) {
  if (address.empty() || HostOf(address) != HostOf(listen)) return {};
  return {address};
}

// Without TLS weftd speaks plain HTTP and gRPC: bearer tokens and learner credentials in the
// clear.
absl::Status CheckLoopback(const Flags& f) {
  if (f.insecure || !f.tls_cert.empty()) return absl::OkStatus();
  for (const auto& [flag, address] : {std::pair<std::string, std::string>{"--listen", f.listen},
                                      {"--coordinator-listen", f.coordinator_listen}}) {
    if (!IsLoopback(HostOf(address))) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, " ", address,
          " is not a loopback address, and weftd speaks plain text: tokens and learner "
          "credentials would cross the network unencrypted. Listen on 127.0.0.1, give weftd a "
          "certificate (--tls-cert, --tls-key), or pass --insecure on a network you trust "
          "(docs/security.md)"));
    }
  }
  return absl::OkStatus();
}

// InvalidArgument for a --listen that is not host:port or a learner that cannot run.
absl::Status CheckFlags(Flags& f) {
  auto colon = f.listen.rfind(':');
  if (colon == std::string::npos || !absl::SimpleAtoi(f.listen.substr(colon + 1), &f.port)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--listen must be host:port, got '", f.listen, "'"));
  }
  f.host = f.listen.substr(0, colon);
  if (f.tls_cert.empty() != f.tls_key.empty() || (!f.tls_ca.empty() && f.tls_cert.empty())) {
    return absl::InvalidArgumentError(
        "--tls-cert and --tls-key go together (and --tls-ca with them)");
  }
  for (std::string* path : {&f.tls_cert, &f.tls_key, &f.tls_ca}) {
    if (path->empty()) continue;
    if (access(path->c_str(), R_OK) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(*path, " cannot be read: ", strerror(errno)));
    }
    *path = std::filesystem::absolute(*path).string();  // learners start elsewhere
  }
  if (f.store != "sqlite" && !absl::StartsWith(f.store, "postgresql://") &&
      !absl::StartsWith(f.store, "postgres://")) {
    return absl::InvalidArgumentError("--store must be sqlite or a postgresql:// connection URI");
  }
  if (f.executor == "slurm" && !f.config.empty()) {
    return absl::InvalidArgumentError(
        "--config lists nodes for the local executor; with --executor slurm they are Slurm's");
  }
  if (f.store != "sqlite" && f.max_store_bytes > 0) {
    return absl::InvalidArgumentError(
        "--max-store-bytes caps the SQLite store only; a PostgreSQL server bounds its own disk");
  }
  if (f.name.empty()) f.name = weftd::DefaultMemberName(f.port);
  if (auto s = weftd::CheckMemberName(f.name); !s.ok()) return s;
  f.rest.tls_cert_path = f.tls_cert;
  f.rest.tls_key_path = f.tls_key;
  if (auto s = CheckLoopback(f); !s.ok()) return s;
  if (access(f.learner.c_str(), X_OK) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("learner binary ", f.learner, " is not executable (use --learner)"));
  }
  return absl::OkStatus();
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

// SIGINT and SIGTERM set g_stop (main then shuts down); SIGPIPE is ignored.
void HandleSignals() {
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

// The line that says weftd is up, and where and how.
void LogListening(const Flags& flags, const std::string& data_dir, const std::string& store,
                  const std::vector<weft::scheduler::Node>& nodes, const std::string& coordinator) {
  double cpus = 0;
  for (const auto& n : nodes) cpus += n.capacity.cpus;
  spdlog::info(
      "listening on {}://{}:{} (data dir {}, store {}, {} node(s), {} cpus, policy {}, learners "
      "report to {}{})",
      flags.tls_cert.empty() ? "http" : "https", flags.host, flags.port, data_dir, store,
      nodes.size(), cpus, flags.policy, coordinator, flags.tls_cert.empty() ? "" : " over TLS");
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
  options.heartbeat_timeout_ms = static_cast<int64_t>(b.flags.heartbeat_timeout_seconds * 1000);
  options.coordinator_ca_path = b.flags.tls_ca.empty() ? b.flags.tls_cert : b.flags.tls_ca;
  return options;
}

// Leads until SIGINT or SIGTERM: tenancy, the executor, recovery, the coordinator, the REST API
// and the control loop. `keeper` renews the lease of a weftd that shares its store (null: the
// only weftd, on SQLite); learners are told every member's coordinator.
int Lead(Base& b, std::unique_ptr<weftd::LeaseKeeper> keeper,
         const std::string& previous_coordinator) {
  Flags& flags = b.flags;
  if (auto s = weftd::SetUpTenancy(b.env, b.store, b.data_dir); !s.ok()) return Fail(s);
  auto learner_key = weftd::LearnerKey(b.env, b.data_dir);
  if (!learner_key.ok()) return Fail(learner_key.status());
  weft::Artifacts artifacts(b.store, b.env, b.data_dir, weft::SystemClock::Get(),
                            {flags.max_artifact_mb << 20, flags.tenant_artifact_mb << 20});
  if (auto s = artifacts.RemoveUnnamed(); !s.ok()) return Fail(s);
  if (flags.default_datasets) {
    if (auto s = weftd::RegisterDebianDatasets(b.store); !s.ok()) return Fail(s);
  }
  auto executor = weftd::MakeExecutor(
      {flags.executor, flags.learner, flags.slurm_partition, flags.memory_limits}, b.data_dir,
      &b.nodes);
  if (!executor.ok()) return Fail(executor.status());
  auto policy = SchedulingPolicy(flags.policy, b.store);
  if (!policy.ok()) return Fail(policy.status());
  weft::ControllerOptions options = ControllerOptionsFor(b, *learner_key);
  options.artifacts = &artifacts;
  weft::DiskQuota disk_quota(b.store, weft::JobLayout(b.data_dir), &artifacts,
                             weft::SystemClock::Get(), {flags.tenant_disk_quota_mb});
  options.disk_quota = &disk_quota;
  weft::Controller controller(b.store, **executor, **policy, weft::SystemClock::Get(), options,
                              b.env);
  weft::CoordinatorService service(controller, controller.credentials(),
                                   static_cast<int>(options.heartbeat_interval_ms));
  auto grpc_server = StartCoordinator(b.env, b.data_dir, flags, &service,
                                      SameHost(previous_coordinator, flags.coordinator_listen));
  if (!grpc_server.ok()) return Fail(grpc_server.status());
  const std::string self = (*grpc_server)->address();
  for (const std::string& a : (*grpc_server)->also()) {
    spdlog::info("also serving learners on {}, the previous leader's coordinator address", a);
  }
  controller.SetCoordinatorAddress(self);
  if (keeper) {
    keeper->SetOnMembers([&](const std::vector<weft::Member>& members) {
      std::vector<std::string> list = weftd::CoordinatorList(self, members);
      controller.SetCoordinatorAddress(absl::StrJoin(list, ","));
      service.SetCoordinators(std::move(list));
    });
  }
  if (auto s = controller.Recover(); !s.ok()) {
    return Fail(absl::InternalError(absl::StrCat("recovery failed: ", s.message())));
  }
  flags.rest.admin_token_path = b.data_dir + "/admin.token";
  weft::api::RestServer rest(b.store, controller, &artifacts, weft::SystemClock::Get(), flags.rest);
  if (auto s = rest.Start(flags.host, flags.port); !s.ok()) return Fail(s);
  controller.StartLoop();
  // Deliveries the outbox holds from before a restart go out now.
  weft::api::WebhookDispatcher webhooks(b.store, weft::SystemClock::Get(), flags.rest.webhooks);
  webhooks.Start();
  LogListening(flags, b.data_dir, b.store_description, b.nodes, self);
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  spdlog::info("shutting down");
  if (keeper) keeper->SetOnMembers(nullptr);  // no more calls into the controller
  rest.Stop();
  webhooks.Stop();
  controller.StopLoop();
  (*grpc_server)->Shutdown();
  if (keeper) keeper->Release();
  return 0;
}

// This weftd's REST API address as its peers and clients reach it.
std::string ApiAddress(const Flags& flags) {
  std::string host = flags.host;
  if (host == "0.0.0.0" || host == "::" || host == "[::]") {
    host = weftd::DefaultMemberName(0);
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
  ASSIGN_OR_RETURN(auto api, weftd::StandbyApi::Start(b.flags.host, b.flags.port, b.flags.tls_cert,
                                                      b.flags.tls_key));
  std::optional<weft::Lease> lease =
      weftd::AwaitLease(election, me, ttl_ms, g_stop, [&](const weft::Member& leader) {
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
  election.Fence(lease->epoch, [epoch = lease->epoch](int64_t now) {
    weftd::ExitDeposed(absl::StrCat("this weftd no longer leads: a store write found leader epoch ",
                                    now, ", this weftd led at epoch ", epoch));
  });
  // The learners that know only the previous leader's coordinator reach this one there, when
  // it was on this host (and so is free now, it being dead).
  std::string previous = lease->last_holder.coordinator;
  if (previous == me.coordinator) previous.clear();
  return Lead(b, std::make_unique<weftd::LeaseKeeper>(election, me, *lease, ttl_ms), previous);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"weftd: the weft training service daemon"};
  Flags flags;
  AddFlags(app, flags);
  CLI11_PARSE(app, argc, argv);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ weftd: %v");
  KeepToOwner();
  if (auto s = CheckFlags(flags); !s.ok()) return Fail(s);
  std::vector<weft::scheduler::Node> nodes = {weftd::ThisHost()};
  std::map<std::string, std::vector<int>> cpusets;
  if (!flags.config.empty()) {
    auto n = weftd::ReadNodes(flags.config, &cpusets);
    if (!n.ok()) return Fail(n.status());
    nodes = *n;
  }
  // Every file weftd writes that matters goes through one Env (common/env.h).
  weft::Env& env = weft::Env::Default();
  auto data_dir = LockDataDir(env, flags.data_dir, flags.store == "sqlite");
  if (!data_dir.ok()) return Fail(data_dir.status());
  std::string store_description;
  auto store = weftd::OpenStore(flags.store, flags.max_store_bytes, *data_dir, &store_description);
  if (!store.ok()) return Fail(store.status());
  HandleSignals();
  Base base{flags, env, *data_dir, **store, store_description, nodes, cpusets};
  auto* election = dynamic_cast<weft::Leadership*>(store->get());
  return election != nullptr ? StandByThenLead(base, *election) : Lead(base, nullptr, "");
}
