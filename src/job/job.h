// The job domain's records: a job as weftd keeps it (state, attempt, learners, progress, targets
// met), its history, metric points, checkpoints and models, experiments, tenants and their
// tokens. Plain data that the store persists, the controller drives and the API shows; no I/O.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "job/job_state.h"

namespace weft {

// Where a job is in its training budget. Counts are cumulative over the job.
struct JobProgress {
  int epoch = 0;  // epochs completed
  int epochs_total = 0;
  int64_t step = 0;  // optimizer steps taken
  int64_t steps_total = 0;
  int64_t samples = 0;  // training samples consumed
};

// One learner of a job's current attempt; a job's learners are indexed by their rank in the
// current generation.
struct LearnerSlot {
  std::string node;  // node it was placed on
  int64_t pid = 0;   // its process id once started; 0 before
  // The learner's rank when its attempt started, which it keeps for life: its identity towards
  // weftd (coordinator calls, the executor's handle, its log file) when an elastic job's
  // membership changes and ranks are renumbered.
  int id = 0;
  // The GPU devices it holds on its node, by their index there (scheduler::GpuDevice::index),
  // ascending; empty for a learner without GPUs.
  std::vector<int> gpus;
  // When its resources were given to it (unix ms): its GPU time counts from then until it leaves
  // the job (JobRecord::GpuMs).
  TimeMs since_ms = 0;
  bool operator==(const LearnerSlot& o) const {
    return node == o.node && pid == o.pid && id == o.id && gpus == o.gpus && since_ms == o.since_ms;
  }
};

// One weft-ps process of a scale-out parameter-server job (training.ps.servers > 1).
struct ServerSlot {
  std::string node;     // node it was placed on
  int64_t pid = 0;      // its process id once started; 0 before
  int index = 0;        // its shard: keys ShardRange(parameters, servers, index)
  std::string address;  // host:port it serves on
  bool operator==(const ServerSlot& o) const {
    return node == o.node && pid == o.pid && index == o.index && address == o.address;
  }
};

struct JobRecord {
  std::string id;
  std::string tenant = "default";
  std::string name;
  JobState state = JobState::kQueued;
  std::string reason;     // reason of the latest transition
  std::string manifest;   // the manifest exactly as submitted (YAML or JSON)
  std::string spec_json;  // canonical JSON of the validated spec (job/job_spec.h)
  TimeMs created_ms = 0;
  TimeMs updated_ms = 0;  // time of the latest transition
  int64_t attempt = 0;    // incremented each time learners are started
  int restarts = 0;       // restarts after learner failures (bounded by max_restarts)
  // The current attempt's learners by rank (the gang's placement and pids); empty when the job
  // holds no resources.
  std::vector<LearnerSlot> learners;
  // A scale-out parameter-server job's weft-ps processes (training.ps.servers > 1), in shard
  // order, placed with its learners as one gang. Empty for every other job.
  std::vector<ServerSlot> servers;
  // Releases the gang at `now_ms` (unix ms): no learner and no server; the learners' GPU time is
  // counted into gpu_ms.
  void ClearGang(TimeMs now_ms) {
    SetLearners({}, now_ms);
    servers.clear();
  }
  // The learners become `members` at `now_ms`: the GPU time and the learner time of those that
  // are not among them (by id) are counted into gpu_ms and learner_ms.
  void SetLearners(std::vector<LearnerSlot> members, TimeMs now_ms) {
    for (const LearnerSlot& l : learners) {
      const bool stays = std::any_of(members.begin(), members.end(),
                                     [&](const LearnerSlot& m) { return m.id == l.id; });
      if (!stays) {
        gpu_ms += HeldGpuMs(l, now_ms);
        learner_ms += HeldMs(l, now_ms);
      }
    }
    learners = std::move(members);
  }
  // Learner-milliseconds of learners that have left the job: each one's time from its placement
  // until it left, over every attempt. With the ones it holds now (LearnerMs), the service the
  // job has attained, which least-attained-service policies order by.
  int64_t learner_ms = 0;
  int64_t LearnerMs(TimeMs now_ms) const { return learner_ms + SumHeld(now_ms, HeldMs); }
  // The milliseconds from learner `l`'s placement to `now_ms` (0 before it, or when the record
  // holds no placement time).
  static int64_t HeldMs(const LearnerSlot& l, TimeMs now_ms) {
    return l.since_ms > 0 ? std::max<TimeMs>(0, now_ms - l.since_ms) : 0;
  }
  // GPU-milliseconds of learners that have left the job: each one's devices × the time from its
  // placement until it left. Kept over every attempt of the job.
  int64_t gpu_ms = 0;
  // The job's GPU-milliseconds up to `now_ms`: those of the learners that left and of the ones
  // it holds now.
  int64_t GpuMs(TimeMs now_ms) const { return gpu_ms + SumHeld(now_ms, HeldGpuMs); }
  // Learner `l`'s devices × the milliseconds from its placement to `now_ms` (0 before it).
  static int64_t HeldGpuMs(const LearnerSlot& l, TimeMs now_ms) {
    return static_cast<int64_t>(l.gpus.size()) * std::max<TimeMs>(0, now_ms - l.since_ms);
  }
  // `held(l, now_ms)` summed over the learners it holds now.
  int64_t SumHeld(TimeMs now_ms, int64_t (*held)(const LearnerSlot&, TimeMs)) const {
    int64_t ms = 0;
    for (const LearnerSlot& l : learners) ms += held(l, now_ms);
    return ms;
  }
  // The membership generation of the current attempt: 1 as started, +1 at each in-place
  // membership change of an elastic job (a learner lost, the survivors go on); 0 before any.
  int64_t generation = 0;
  // The id the attempt's next learner gets: ids are never reused within an attempt (a lost
  // learner's id is not a newcomer's).
  int next_learner_id = 0;
  JobProgress progress;
  std::optional<double> best_test_accuracy;
  std::optional<TimeMs> deliver_met_ms;   // when targets.deliver was first met
  std::optional<TimeMs> complete_met_ms;  // when targets.complete was met
  // A trial of an experiment (ExperimentRecord): the experiment's id and the trial's number
  // (0, 1, …); "" and -1 for every other job. Set when the job is created, never changed.
  std::string experiment;
  int trial = -1;
};

// An experiment: a hyperparameter search over a base job whose trials are jobs of its tenant
// (job/experiment_spec.h has its manifest, control/experiment_search.h its search).
struct ExperimentRecord {
  std::string id;  // "exp-…"
  std::string tenant = "default";
  std::string name;
  ExperimentState state = ExperimentState::kRunning;
  std::string reason;        // of the latest change of state
  std::string manifest;      // the manifest exactly as submitted
  std::string search_state;  // the search's whole state (ExperimentSearch::StateJson)
  // Counts the writes: the store writes a record only over the revision it was read at, so two
  // writers (a weftd and its successor) never lose each other's trials.
  int64_t revision = 0;
  std::string best_job;  // the trial with the best metric so far; "" before any result
  std::optional<double> best_metric;
  // The first trial whose model met the deliver target: its delivered model is the experiment's.
  std::string delivered_job;
  std::optional<TimeMs> deliver_met_ms;   // when that was
  std::optional<TimeMs> complete_met_ms;  // when a trial met the complete target
  TimeMs created_ms = 0;
  TimeMs updated_ms = 0;
};

// One entry of a job's state history.
struct StateEvent {
  int64_t seq = 0;  // 1, 2, ... per job
  TimeMs time_ms = 0;
  std::optional<JobState> from;  // nullopt for the submission
  JobState to = JobState::kQueued;
  std::string reason;
};

// One point of a job's metric time series.
struct MetricRecord {
  int64_t step = 0;
  int epoch = 0;
  TimeMs wall_time_ms = 0;
  double train_loss = 0;
  double samples_per_s = 0;
  std::optional<double> test_accuracy;  // set on evaluation points, in [0, 1]
  std::optional<double> test_loss;
  // The learners samples_per_s was measured at, as the learner reported it (bounded to
  // [1, kMaxLearners]); 0 when it did not say: the job's current world size stands in.
  int world_size = 0;
};

// A model file the learner made durable. At most one per (job, kind).
struct ModelRecord {
  std::string kind;       // "delivered" or "final"
  std::string path;       // torch::save file
  std::string card_path;  // JSON model card
  double test_accuracy = 0;
  int epoch = 0;
  int64_t step = 0;
  int64_t bytes = 0;
  TimeMs created_ms = 0;
};

// A checkpoint the learner made durable and weftd acknowledged.
struct CheckpointRecord {
  int64_t step = 0;  // optimizer steps taken when it was written
  int epoch = 0;     // epochs completed
  std::string path;
  int64_t bytes = 0;
  TimeMs created_ms = 0;
  // How long the learner took to serialise and durably write it, as it reported (untrusted);
  // counted into weft_checkpoint_write_duration_seconds, not stored.
  double write_seconds = 0;
};

// A tenant: a team sharing the cluster, with a quota no set of its running jobs may exceed and a
// weight for weighted fair sharing (scheduler/fair_share_policy.h).
struct TenantRecord {
  std::string name;
  bool has_quota = false;       // false: limited only by the cluster
  double quota_cpus = 0;        // cores
  int64_t quota_memory_mb = 0;  // MiB
  int quota_gpus = 0;
  double weight = 1;
  TimeMs created_ms = 0;
  // What the tenant's files may take on disk, MiB (control/disk_quota.h); none: weftd's
  // --tenant-disk-quota-mb.
  std::optional<int64_t> disk_quota_mb;
  // GPU-milliseconds its deleted jobs held (each job's JobRecord::gpu_ms, added when it is
  // deleted): with its jobs' own, what the tenant has used. Read only; the store keeps it.
  int64_t deleted_jobs_gpu_ms = 0;
};

// A file a tenant uploaded for its jobs (POST /v1/artifacts): a TorchScript model, a code
// archive, a small data set. Named by the tenant; its content is stored once per tenant, under its
// SHA-256, however many names point at it.
struct ArtifactRecord {
  std::string tenant;
  std::string name;    // control/artifacts.h CheckArtifactName
  std::string sha256;  // hex digest of the content
  int64_t bytes = 0;
  TimeMs created_ms = 0;
};

// A data set the admin registered for tenants' jobs (weft dataset add; POST /v1/datasets).
// Manifests name it (data.dataset); weftd resolves the name to `path` when learners start, so a
// tenant never names a host path.
// A tenant's webhook: weftd POSTs every transition of the tenant's jobs into one of `events` to
// `url`, signed with `secret` (control/webhooks.h).
struct WebhookRecord {
  std::string id;  // "hook-…"
  std::string tenant;
  std::string url;
  std::vector<std::string> events;  // job state names, e.g. "DELIVERED"
  std::string secret;               // the HMAC-SHA256 key (hex); shown once, at creation
  TimeMs created_ms = 0;
  std::string last_status;                // the latest attempt's outcome; "" before the first
  std::optional<TimeMs> last_attempt_ms;  // when it was made
  int64_t pending = 0;                    // deliveries neither made nor given up (read only)
};

// One delivery a webhook is owed: a transition of one of its tenant's jobs, written to the
// store's outbox in the transition's own transaction.
struct WebhookDelivery {
  int64_t id = 0;  // rising; the receivers' idempotency key
  std::string webhook_id;
  std::string url;
  std::string secret;
  std::string job;
  std::string tenant;
  std::string event;  // the state entered, e.g. "DELIVERED"
  std::optional<std::string> from;
  std::string reason;
  TimeMs time_ms = 0;  // of the transition
  int attempts = 0;    // made so far
};

struct DatasetRecord {
  std::string name;                  // CheckArtifactName's rule
  std::string path;                  // absolute directory on every node
  std::string format;                // "idx": the four IDX files of MNIST's layout
  bool all_tenants = false;          // every tenant, present and future, may use it
  std::vector<std::string> tenants;  // else these, by name
  TimeMs created_ms = 0;

  bool UsableBy(const std::string& tenant) const {
    return all_tenants || std::find(tenants.begin(), tenants.end(), tenant) != tenants.end();
  }
};

// A container image jobs may run on (weft image add; POST /v1/images): the admin's, granted to
// tenants as a data set is, or a tenant's own, imported from an archive it uploaded. The engine
// keeps the image itself; here is what names it.
struct ImageRecord {
  std::string tenant;        // "" for the admin's; else the tenant whose own image it is
  std::string name;          // CheckArtifactName's rule; unique per owner
  std::string reference;     // the engine's, e.g. localhost/weft/acme/env:0123456789abcdef
  std::string digest;        // SHA-256 of the archive it was imported from (hex)
  std::string format;        // "oci-archive", "docker-archive" or "rootfs"
  int64_t bytes = 0;         // what the engine keeps; counts against its tenant's disk quota
  bool all_tenants = false;  // the admin's: every tenant may use it
  std::vector<std::string> tenants;  // the admin's: else these, by name
  TimeMs created_ms = 0;

  // Whether `tenant` may run jobs on it: its own, or the admin's granted to it.
  bool UsableBy(const std::string& t) const {
    if (!tenant.empty()) return tenant == t;
    return all_tenants || std::find(tenants.begin(), tenants.end(), t) != tenants.end();
  }
};

// A bearer token. Only its SHA-256 is stored; the token itself is shown once at creation.
struct TokenRecord {
  std::string id;      // "tok-<hex>", how people name it to revoke it
  std::string tenant;  // owner; empty for the admin token
  std::string sha256;  // hex digest of the token
  TimeMs created_ms = 0;
  std::optional<TimeMs> revoked_ms;
};

}  // namespace weft
