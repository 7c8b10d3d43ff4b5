// weftd's command line: its flags, their defaults and help, and the checks that run before
// anything starts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "api/rest_server.h"
#include "common/rate_limit.h"

namespace weft::daemon {

// The directory of this process's executable (weft-learner is found beside weftd).
std::string SelfDir();

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
  weft::RateLimit metric_points = {50, 500};  // per job: points per second, burst
  std::vector<std::string> webhook_allow;  // HOST:PORT entries, parsed into rest.webhooks.allowed
  bool default_datasets = true;
  bool insecure = false;
  bool allow_unsandboxed_commands = false;
  int64_t max_store_bytes = -1;  // -1: sized from the free disk at start (backends.h StoreCap)
  int64_t max_artifact_mb = 256;
  int64_t tenant_artifact_mb = 2048;
  int64_t tenant_disk_quota_mb = 20480;
  int64_t tenant_max_jobs = 10000;
  int64_t tenant_max_active_jobs = 1000;
  int64_t tenant_max_experiments = 1000;
  int64_t tenant_max_running_experiments = 20;
  double disk_check_seconds = 10;
  double heartbeat_timeout_seconds = 60;
  std::string memory_limits = "auto";  // auto | cgroup | watchdog
  std::string runtime = "podman";      // podman | none
  std::string runtime_image = "localhost/weft/runtime:latest";
  int64_t pids_limit = 4096;
  int64_t first_job_uid = 1000000000;
  std::string tls_cert, tls_key, tls_ca;  // PEM files; absolute once checked
  std::string host;                       // of --listen
  int port = 0;
};

// Adds every flag to `app`, bound to `f`.
void AddFlags(CLI::App& app, Flags& f);

// InvalidArgument for a --listen that is not host:port, a learner that cannot run, TLS files
// that cannot be read, an address off loopback in plain text (unless --insecure), and flags that
// do not go together, a --webhook-allow entry that is not HOST:PORT. Fills Flags::host, port,
// name, the REST options' TLS paths and allowed webhook receivers.
absl::Status CheckFlags(Flags& f);

// The host of "host:port" ("" if there is no colon).
std::string HostOf(const std::string& address);

}  // namespace weft::daemon
