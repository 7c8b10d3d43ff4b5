#include "daemon/flags.h"

#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "control/webhook_receivers.h"
#include "daemon/leader.h"
#include "scheduler/policies.h"

namespace weft::daemon {
namespace {

bool IsLoopback(const std::string& host) {
  return absl::StartsWith(host, "127.") || host == "localhost" || host == "::1" || host == "[::1]";
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

}  // namespace

std::string SelfDir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  buf[n] = 0;
  return std::filesystem::path(buf).parent_path().string();
}

void AddRateFlags(CLI::App& app, Flags& f);
void AddLimitFlags(CLI::App& app, Flags& f);
void AddTlsFlags(CLI::App& app, Flags& f);
void AddRuntimeFlags(CLI::App& app, Flags& f);

std::string HostOf(const std::string& address) {
  auto colon = address.rfind(':');
  return colon == std::string::npos ? "" : address.substr(0, colon);
}

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
  app.add_option("--webhook-allow", f.webhook_allow,
                 "the receivers tenants' webhooks may call, comma-separated HOST:PORT or "
                 "[IPV6]:PORT (none by default); a name resolving to a private, loopback or "
                 "link-local address is called only if that ADDRESS:PORT is listed too")
      ->delimiter(',');
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
                 "cap on the SQLite store's size (-1: its size at start plus a quarter of the "
                 "disk's free space, at least 256 MiB; 0: the disk's); past it, writes get 507 "
                 "as on a full disk")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{-1}, int64_t{1} << 50));
  AddRateFlags(app, f);
  AddLimitFlags(app, f);
}

// How fast, and how much at once, a tenant may use weftd: REST requests, its jobs' metric points,
// uploads and follow streams (each holds a thread).
void AddRateFlags(CLI::App& app, Flags& f) {
  app.add_option("--tenant-requests-per-second", f.rest.tenant_rate.requests_per_second,
                 "each tenant's sustained REST request rate; over it 429 (0: no limit)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--tenant-burst", f.rest.tenant_rate.burst,
                 "requests a tenant may send at once above its rate")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1e6));
  app.add_option("--metric-points-per-second", f.metric_points.requests_per_second,
                 "metric points each job's learners may report per second; past it (and the "
                 "burst) points are dropped, evaluations last (0: no limit)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--metric-points-burst", f.metric_points.burst,
                 "metric points a job may report at once above its rate")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1e7));
  app.add_option("--uploads-per-tenant", f.rest.uploads_per_tenant,
                 "uploads (weft artifact upload) a tenant may have in progress at once; all "
                 "tenants together get at most a quarter of the server's threads; over it 429")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--upload-timeout-seconds", f.rest.upload_timeout_s,
                 "how long an upload's whole body may take to arrive; past it 408 and the "
                 "connection is closed")
      ->capture_default_str()
      ->check(CLI::Range(1, 86400));
  app.add_option("--follow-streams-per-tenant", f.rest.follow_streams_per_tenant,
                 "streams (weft logs -f, event streams, weft follow) a tenant may hold open at "
                 "once; over it 429")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
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
  app.add_option("--tenant-max-jobs", f.tenant_max_jobs,
                 "jobs a tenant may have in the store, in any state; past it a submission gets "
                 "409 until finished jobs are deleted (0: no limit)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  app.add_option("--tenant-max-active-jobs", f.tenant_max_active_jobs,
                 "jobs of a tenant not yet settled (queued, running, ...); past it a submission "
                 "gets 409 (0: no limit)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  app.add_option("--tenant-max-experiments", f.tenant_max_experiments,
                 "experiments a tenant may have in the store, in any state; past it a submission "
                 "gets 409 until ended ones are deleted (0: no limit)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  app.add_option("--tenant-max-running-experiments", f.tenant_max_running_experiments,
                 "experiments of a tenant running at once; past it a submission or a resume gets "
                 "409 (0: no limit)")
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
  AddRuntimeFlags(app, f);
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

// What learners run in (docs/security.md, "Learners in containers").
void AddRuntimeFlags(CLI::App& app, Flags& f) {
  app.add_option("--runtime", f.runtime,
                 "what every learner runs in: podman (a container per learner: its job's uid, no "
                 "capabilities, seccomp, read-only root, its gang's network only; needs root), "
                 "bwrap (bubblewrap on the host's root, for hosts without podman: the same but "
                 "no seccomp filter or CPU quota, and no images; needs root) or none "
                 "(unconfined, as weftd's user: only where every tenant is trusted)")
      ->check(CLI::IsMember({"podman", "bwrap", "none"}))
      ->capture_default_str();
  app.add_option("--runtime-image", f.runtime_image,
                 "weft's runtime image (scripts/build-runtime-image.sh builds it): built-in and "
                 "TorchScript learners run on it, and command jobs that name no image")
      ->capture_default_str();
  app.add_option("--learner-pids-limit", f.pids_limit,
                 "processes and threads one learner's container may hold at once (a fork bomb "
                 "stops there)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{64}, int64_t{1} << 20));
  app.add_option("--first-job-uid", f.first_job_uid,
                 "jobs' containers run as uids from here on, one per running job (65536 of "
                 "them; no user of the host may have one)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{100000}, int64_t{4294901760}));
}

absl::Status CheckFlags(Flags& f) {
  auto colon = f.listen.rfind(':');
  if (colon == std::string::npos || !absl::SimpleAtoi(f.listen.substr(colon + 1), &f.port)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--listen must be host:port, got '", f.listen, "'"));
  }
  f.host = f.listen.substr(0, colon);
  absl::StatusOr<std::vector<weft::WebhookReceiver>> allowed =
      weft::ParseWebhookAllow(f.webhook_allow);
  if (!allowed.ok()) return allowed.status();
  f.rest.webhooks.allowed = std::move(*allowed);
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
  if (f.store != "sqlite" && f.max_store_bytes > 0) {  // -1 (auto) is nothing to refuse
    return absl::InvalidArgumentError(
        "--max-store-bytes caps the SQLite store only; a PostgreSQL server bounds its own disk");
  }
  if (f.name.empty()) f.name = DefaultMemberName(f.port);
  if (auto s = CheckMemberName(f.name); !s.ok()) return s;
  f.rest.tls_cert_path = f.tls_cert;
  f.rest.tls_key_path = f.tls_key;
  if (auto s = CheckLoopback(f); !s.ok()) return s;
  if (access(f.learner.c_str(), X_OK) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("learner binary ", f.learner, " is not executable (use --learner)"));
  }
  return absl::OkStatus();
}

}  // namespace weft::daemon
