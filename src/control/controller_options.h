// What a Controller is given (control/controller.h): the cluster, the learners' coordination
// settings, its timeouts, and the services it borrows; and the metrics it counts.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "scheduler/cluster.h"

namespace weft {

class Artifacts;
class DiskQuota;
class Images;

// What the controller counts into MetricsRegistry::Global() (docs/operations.md lists them).
inline constexpr char kTransitionsMetric[] = "weft_job_transitions_total";
inline constexpr char kRestartsMetric[] = "weft_job_restarts_total";
inline constexpr char kModelsMetric[] = "weft_models_committed_total";
inline constexpr char kCheckpointsMetric[] = "weft_checkpoints_committed_total";
inline constexpr char kCheckpointBytesMetric[] = "weft_checkpoint_bytes_committed_total";
inline constexpr char kCheckpointSecondsMetric[] = "weft_checkpoint_write_duration_seconds";
inline constexpr char kRoundMetric[] = "weft_scheduling_round_duration_seconds";

struct ControllerOptions {
  std::string data_dir;                // jobs live in <data_dir>/jobs/<id>/
  std::vector<scheduler::Node> nodes;  // the cluster's inventory
  std::string coordinator_address;     // host:port(s) learners report to, comma-separated
  std::string coordinator_ca_path;     // PEM roots learners verify it by; empty: plain text
  // weft-ps shards speak TLS with their attempt's identity (weftd has a certificate).
  bool ps_tls = false;
  int64_t schedule_interval_ms = 200;    // scheduling round period
  int64_t heartbeat_interval_ms = 1000;  // what learners are told to use
  int64_t heartbeat_timeout_ms = 60000;  // a RUNNING learner silent this long is failed
  int64_t start_timeout_ms = 120000;     // STARTING without registering this long is failed
  int64_t stop_grace_ms = 10000;         // SIGTERM -> SIGKILL delay
  int64_t restart_backoff_ms = 1000;     // first restart delay, doubled each restart
  int64_t restart_backoff_max_ms = 60000;
  std::string learner_key;  // secret behind learner credentials; empty = none
  std::map<std::string, std::vector<int>> node_cpusets;  // node -> CPUs its learners are pinned to
  // Tenants' uploads, where model.torchscript names an artifact (borrowed; null: a manifest
  // naming one is refused).
  Artifacts* artifacts = nullptr;
  // A command job whose program cannot be sandboxed runs without the sandbox (logged) instead
  // of failing: weftd --allow-unsandboxed-commands.
  bool allow_unsandboxed_commands = false;
  // Tenants' disk quotas (borrowed; null: none enforced), and how often the loop checks the
  // tenants with active jobs against theirs (EnforceDiskQuotas).
  DiskQuota* disk_quota = nullptr;
  int64_t disk_check_interval_ms = 10000;
  // The container images command jobs name (borrowed; null: a manifest naming one is refused).
  Images* images = nullptr;
  // Jobs one tenant may have in the store (any state; weftd --tenant-max-jobs) and of them not
  // settled (--tenant-max-active-jobs), so one tenant cannot fill the shared store or the
  // control rounds every tenant's jobs go through; 0: no limit.
  int64_t tenant_max_jobs = 10000;
  int64_t tenant_max_active_jobs = 1000;
};

}  // namespace weft
