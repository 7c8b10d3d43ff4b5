// The durable store behind weftd: jobs, their manifests, state history, metric time series and
// model artifacts. Every job state change is written here before anything acts on it, so a
// weftd killed at any instant restarts into a consistent picture.
//
// Thread-safety: implementations are safe to call from many threads; each call is atomic.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "spec/job_state.h"

namespace weft {

// Where a job is in its training budget. Counts are cumulative over the job.
struct JobProgress {
  int epoch = 0;          // epochs completed
  int epochs_total = 0;
  int64_t step = 0;       // optimizer steps taken
  int64_t steps_total = 0;
  int64_t samples = 0;    // training samples consumed
};

// One learner of a job's current attempt; a job's learners are indexed by rank.
struct LearnerSlot {
  std::string node;  // node it was placed on
  int64_t pid = 0;   // its process id once started; 0 before
  bool operator==(const LearnerSlot& o) const { return node == o.node && pid == o.pid; }
};

struct JobRecord {
  std::string id;
  std::string tenant = "default";
  std::string name;
  JobState state = JobState::kQueued;
  std::string reason;         // reason of the latest transition
  std::string manifest;       // the manifest exactly as submitted (YAML or JSON)
  std::string spec_json;      // canonical JSON of the validated spec (spec/job_spec.h)
  TimeMs created_ms = 0;
  TimeMs updated_ms = 0;      // time of the latest transition
  int64_t attempt = 0;        // incremented each time learners are started
  int restarts = 0;           // restarts after learner failures (bounded by max_restarts)
  // The current attempt's learners by rank (the gang's placement and pids); empty when the job
  // holds no resources.
  std::vector<LearnerSlot> learners;
  JobProgress progress;
  std::optional<double> best_test_accuracy;
  std::optional<TimeMs> deliver_met_ms;   // when targets.deliver was first met
  std::optional<TimeMs> complete_met_ms;  // when targets.complete was met
};

// One entry of a job's state history.
struct StateEvent {
  int64_t seq = 0;            // 1, 2, ... per job
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
};

// A model file the learner made durable. At most one per (job, kind).
struct ArtifactRecord {
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
  int64_t step = 0;       // optimizer steps taken when it was written
  int epoch = 0;          // epochs completed
  std::string path;
  int64_t bytes = 0;
  TimeMs created_ms = 0;
};

// A tenant: a team sharing the cluster, with a quota no set of its running jobs may exceed and a
// weight for weighted fair sharing (scheduler/fair_share_policy.h).
struct TenantRecord {
  std::string name;
  bool has_quota = false;   // false: limited only by the cluster
  double quota_cpus = 0;    // cores
  int64_t quota_memory_mb = 0;  // MiB
  int quota_gpus = 0;
  double weight = 1;
  TimeMs created_ms = 0;
};

// A bearer token. Only its SHA-256 is stored; the token itself is shown once at creation.
struct TokenRecord {
  std::string id;           // "tok-<hex>", how people name it to revoke it
  std::string tenant;       // owner; empty for the admin token
  std::string sha256;       // hex digest of the token
  TimeMs created_ms = 0;
  std::optional<TimeMs> revoked_ms;
};

class Store {
 public:
  virtual ~Store() = default;

  // Inserts a new job with its first history entry (-> record.state, `reason`).
  // AlreadyExists if the id is taken.
  virtual absl::Status CreateJob(const JobRecord& record, const std::string& reason) = 0;

  // NotFound if there is no such job.
  virtual absl::StatusOr<JobRecord> GetJob(const std::string& id) = 0;

  // Jobs in creation order; all tenants when `tenant` is empty.
  virtual absl::StatusOr<std::vector<JobRecord>> ListJobs(const std::string& tenant = "") = 0;

  // Atomically: checks the stored state is `expected_from`, writes `record` (whose state is the
  // new one, with `record.reason` and `record.updated_ms` as the event's reason and time) and
  // appends the history entry. NotFound for an unknown job; FailedPrecondition if the stored
  // state is not `expected_from` or the transition is illegal (spec/job_state.h).
  virtual absl::Status TransitionJob(const JobRecord& record, JobState expected_from) = 0;

  // Writes the non-state fields of `record` (progress, pid, node, targets, best accuracy).
  // The state, reason and history are left as they are. NotFound for an unknown job.
  virtual absl::Status UpdateJob(const JobRecord& record) = 0;

  // Removes the job and everything that belongs to it. NotFound for an unknown job.
  virtual absl::Status DeleteJob(const std::string& id) = 0;

  // History in order (seq ascending). NotFound for an unknown job.
  virtual absl::StatusOr<std::vector<StateEvent>> History(const std::string& id) = 0;

  // Appends metric points. NotFound for an unknown job.
  virtual absl::Status AppendMetrics(const std::string& id,
                                     const std::vector<MetricRecord>& points) = 0;

  // Metric points in insertion order, at most `limit` of the latest when limit > 0.
  virtual absl::StatusOr<std::vector<MetricRecord>> Metrics(const std::string& id,
                                                            int64_t limit = 0) = 0;

  // Inserts or replaces the artifact of `artifact.kind`. NotFound for an unknown job.
  virtual absl::Status PutArtifact(const std::string& id, const ArtifactRecord& artifact) = 0;

  virtual absl::StatusOr<std::vector<ArtifactRecord>> Artifacts(const std::string& id) = 0;

  // Inserts or replaces the checkpoint at `checkpoint.step`. NotFound for an unknown job.
  virtual absl::Status PutCheckpoint(const std::string& id,
                                     const CheckpointRecord& checkpoint) = 0;
  // Checkpoints newest (highest step) first. NotFound for an unknown job.
  virtual absl::StatusOr<std::vector<CheckpointRecord>> Checkpoints(const std::string& id) = 0;
  // Forgets the checkpoint at `step` (the caller deletes its file). OK if there is none.
  virtual absl::Status DeleteCheckpoint(const std::string& id, int64_t step) = 0;

  // Tenants. AlreadyExists / NotFound by name.
  virtual absl::Status CreateTenant(const TenantRecord& tenant) = 0;
  virtual absl::StatusOr<TenantRecord> GetTenant(const std::string& name) = 0;
  virtual absl::StatusOr<std::vector<TenantRecord>> ListTenants() = 0;  // by name
  virtual absl::Status UpdateTenant(const TenantRecord& tenant) = 0;    // quota and weight
  // Removes the tenant and its tokens. NotFound if unknown; FailedPrecondition while it still
  // owns jobs (the caller deletes those first).
  virtual absl::Status DeleteTenant(const std::string& name) = 0;

  // Tokens. AlreadyExists if the id or digest is taken.
  virtual absl::Status CreateToken(const TokenRecord& token) = 0;
  // The token with this digest, revoked or not. NotFound if none.
  virtual absl::StatusOr<TokenRecord> FindToken(const std::string& sha256) = 0;
  // Tokens of `tenant` (empty: the admin's), oldest first.
  virtual absl::StatusOr<std::vector<TokenRecord>> ListTokens(const std::string& tenant) = 0;
  // Marks token `id` of `tenant` revoked at `when`. NotFound if that tenant has no such token.
  virtual absl::Status RevokeToken(const std::string& tenant, const std::string& id, TimeMs when) = 0;
};

}  // namespace weft
