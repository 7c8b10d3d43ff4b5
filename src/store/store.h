// The durable store behind weftd: jobs, their manifests, state history, metric time series,
// checkpoints, models, experiments, tenants and tokens. It only persists the job domain's records
// (job/job.h); every job state change is written here before anything acts on it, so a weftd
// killed at any instant restarts into a consistent picture.
//
// Its responsibilities are six role interfaces — jobs, what belongs to a job, tenants and their
// tokens, what tenants and the admin name (artifacts, data sets, images), webhooks with their
// outbox, and experiments — that Store joins; one implementation (store/sql_store.h) serves
// them over SQLite and PostgreSQL. Leader election is store/leadership.h.
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
#include "job/job.h"

namespace weft {

// A page of a job list: what follows job `after` ("" from the start), `limit` jobs (0: all).
struct JobPage {
  std::string after;
  int64_t limit = 0;
};

// The jobs' records and their state machine.
class JobStore {
 public:
  virtual ~JobStore() = default;

  // Inserts a new job with its first history entry (-> record.state, `reason`).
  // AlreadyExists if the id is taken.
  virtual absl::Status CreateJob(const JobRecord& record, const std::string& reason) = 0;

  // NotFound if there is no such job.
  virtual absl::StatusOr<JobRecord> GetJob(const std::string& id) = 0;

  // Jobs in creation order; all tenants when `tenant` is empty. With a `page`, only the jobs
  // created after job `page.after` (none if it does not exist), at most `page.limit` of them.
  virtual absl::StatusOr<std::vector<JobRecord>> ListJobs(const std::string& tenant = "",
                                                          const JobPage& page = {}) = 0;

  // The jobs that are not settled (job_state.h IsSettled: all but COMPLETED, FAILED, HALTED),
  // in creation order: what a control round works on, however many jobs have ended.
  virtual absl::StatusOr<std::vector<JobRecord>> ListActiveJobs() = 0;

  // How many jobs `tenant` has in the store, and how many of them are not settled: what its job
  // limits are checked against, without reading the jobs; and the GPU-milliseconds their
  // learners that have left them held (the sum of JobRecord::gpu_ms).
  struct JobCounts {
    int64_t total = 0;
    int64_t active = 0;
    int64_t gpu_ms = 0;
  };
  virtual absl::StatusOr<JobCounts> CountJobs(const std::string& tenant) = 0;

  // Atomically: checks the stored state is `expected_from`, writes `record` (whose state is the
  // new one, with `record.reason` and `record.updated_ms` as the event's reason and time) and
  // appends the history entry. NotFound for an unknown job; FailedPrecondition if the stored
  // state is not `expected_from` or the transition is illegal (job/job_state.h).
  virtual absl::Status TransitionJob(const JobRecord& record, JobState expected_from) = 0;

  // Writes the non-state fields of `record` (progress, pid, node, targets, best accuracy).
  // The state, reason and history are left as they are. NotFound for an unknown job.
  virtual absl::Status UpdateJob(const JobRecord& record) = 0;

  // Removes the job and everything that belongs to it. NotFound for an unknown job.
  virtual absl::Status DeleteJob(const std::string& id) = 0;
};

// What belongs to a job besides its record: state history, metric points, models, checkpoints.
class JobRecordStore {
 public:
  virtual ~JobRecordStore() = default;

  // History in order (seq ascending). NotFound for an unknown job.
  virtual absl::StatusOr<std::vector<StateEvent>> History(const std::string& id) = 0;

  // Appends metric points. A NaN train_loss or samples_per_s is kept as +infinity and a NaN
  // test metric as none (SQLite cannot hold a NaN; JSON shows NaN and infinity alike, as null),
  // so a diverged job's points are kept. NotFound for an unknown job.
  virtual absl::Status AppendMetrics(const std::string& id,
                                     const std::vector<MetricRecord>& points) = 0;

  // Points [from, from + limit) of the job's metric series (0-based, in insertion order; the series
  // only grows, so an index stays put) and how many it holds in all. With from < 0, the latest
  // `limit` points. NotFound for an unknown job.
  struct MetricPage {
    int64_t total = 0;
    int64_t from = 0;
    std::vector<MetricRecord> points;
  };
  virtual absl::StatusOr<MetricPage> MetricRange(const std::string& id, int64_t from,
                                                 int64_t limit) = 0;

  // Inserts or replaces the model of `model.kind`. NotFound for an unknown job.
  virtual absl::Status PutModel(const std::string& id, const ModelRecord& model) = 0;

  virtual absl::StatusOr<std::vector<ModelRecord>> Models(const std::string& id) = 0;

  // A job with its history, its latest `metrics_limit` metric points (all when <= 0) and its
  // models, all as of one instant, in one call: what a status read shows. NotFound for an
  // unknown job.
  struct JobSnapshot {
    JobRecord job;
    std::vector<StateEvent> history;
    std::vector<MetricRecord> metrics;
    std::vector<ModelRecord> models;
  };
  virtual absl::StatusOr<JobSnapshot> GetJobSnapshot(const std::string& id,
                                                     int64_t metrics_limit) = 0;

  // Inserts or replaces the checkpoint at `checkpoint.step`. NotFound for an unknown job.
  virtual absl::Status PutCheckpoint(const std::string& id, const CheckpointRecord& checkpoint) = 0;
  // Checkpoints newest (highest step) first. NotFound for an unknown job.
  virtual absl::StatusOr<std::vector<CheckpointRecord>> Checkpoints(const std::string& id) = 0;
  // Forgets the checkpoint at `step` (the caller deletes its file). OK if there is none.
  virtual absl::Status DeleteCheckpoint(const std::string& id, int64_t step) = 0;
};

// Tenants (quotas, weight) and their bearer tokens (SHA-256 digests only).
class TenantStore {
 public:
  virtual ~TenantStore() = default;

  // Tenants. AlreadyExists / NotFound by name.
  virtual absl::Status CreateTenant(const TenantRecord& tenant) = 0;
  virtual absl::StatusOr<TenantRecord> GetTenant(const std::string& name) = 0;
  virtual absl::StatusOr<std::vector<TenantRecord>> ListTenants() = 0;  // by name
  virtual absl::Status UpdateTenant(const TenantRecord& tenant) = 0;    // quotas and weight
  // Removes the tenant, its tokens, its artifacts' records and its name from data sets' tenants.
  // NotFound if unknown; FailedPrecondition while it still owns jobs or experiments (the caller
  // deletes those first).
  virtual absl::Status DeleteTenant(const std::string& name) = 0;

  // Tokens. AlreadyExists if the id or digest is taken.
  virtual absl::Status CreateToken(const TokenRecord& token) = 0;
  // The token with this digest, revoked or not. NotFound if none.
  virtual absl::StatusOr<TokenRecord> FindToken(const std::string& sha256) = 0;
  // Tokens of `tenant` (empty: the admin's), oldest first.
  virtual absl::StatusOr<std::vector<TokenRecord>> ListTokens(const std::string& tenant) = 0;
  // Marks token `id` of `tenant` revoked at `when`. NotFound if that tenant has no such token.
  virtual absl::Status RevokeToken(const std::string& tenant, const std::string& id,
                                   TimeMs when) = 0;
};

// What tenants and the admin give names to: uploaded artifacts (the files live on disk under
// their SHA-256, control/artifacts.h), registered data sets and container images.
class ArtifactStore {
 public:
  virtual ~ArtifactStore() = default;

  // Tenants' uploaded artifacts. PutArtifact inserts `artifact.name` of `artifact.tenant` or
  // replaces what that name pointed at.
  virtual absl::Status PutArtifact(const ArtifactRecord& artifact) = 0;
  // NotFound if the tenant has no artifact of that name.
  virtual absl::StatusOr<ArtifactRecord> GetArtifact(const std::string& tenant,
                                                     const std::string& name) = 0;
  // The tenant's artifacts by name.
  virtual absl::StatusOr<std::vector<ArtifactRecord>> ListArtifacts(const std::string& tenant) = 0;
  // Forgets the name and answers how many of the tenant's names still point at the same content
  // (at 0 the caller deletes the file). NotFound if the tenant has no artifact of that name.
  virtual absl::StatusOr<int64_t> DeleteArtifact(const std::string& tenant,
                                                 const std::string& name) = 0;

  // Data sets the admin registered. PutDataset inserts or replaces `dataset.name`.
  virtual absl::Status PutDataset(const DatasetRecord& dataset) = 0;
  // NotFound if no data set has that name.
  virtual absl::StatusOr<DatasetRecord> GetDataset(const std::string& name) = 0;
  virtual absl::StatusOr<std::vector<DatasetRecord>> ListDatasets() = 0;  // by name
  // NotFound if no data set has that name.
  virtual absl::Status DeleteDataset(const std::string& name) = 0;

  // Container images (job/job.h ImageRecord), by owner ("" the admin) and name. PutImage
  // inserts or replaces (owner, name).
  virtual absl::Status PutImage(const ImageRecord& image) = 0;
  // NotFound if the owner has no image of that name.
  virtual absl::StatusOr<ImageRecord> GetImage(const std::string& owner,
                                               const std::string& name) = 0;
  // Every image, by owner then name.
  virtual absl::StatusOr<std::vector<ImageRecord>> ListImages() = 0;
  // NotFound if the owner has no image of that name.
  virtual absl::Status DeleteImage(const std::string& owner, const std::string& name) = 0;
};

// Tenants' webhooks and the outbox of deliveries owed to them.
class WebhookStore {
 public:
  virtual ~WebhookStore() = default;

  // Webhooks. Every history entry a job gets (its submission, each transition) adds a delivery
  // to the outbox, in the same transaction, for each webhook of the job's tenant whose events
  // name the state entered: an acknowledged transition is never without its deliveries.
  // Creates the webhook if its tenant has fewer than `max_per_tenant`, counted and inserted in one
  // transaction (concurrent creations, from any weftd, cannot pass the cap together).
  // FailedPrecondition naming the count at the cap; AlreadyExists if the id is taken.
  virtual absl::Status CreateWebhook(const WebhookRecord& webhook, int max_per_tenant) = 0;
  // The tenant's webhooks, oldest first, with their last status and pending count.
  virtual absl::StatusOr<std::vector<WebhookRecord>> ListWebhooks(const std::string& tenant) = 0;
  // Removes the webhook and what it is still owed. NotFound if the tenant has no such webhook.
  virtual absl::Status DeleteWebhook(const std::string& tenant, const std::string& id) = 0;
  // Up to `limit` deliveries due at `now_ms` (neither made nor given up), oldest first.
  virtual absl::StatusOr<std::vector<WebhookDelivery>> DueDeliveries(TimeMs now_ms, int limit) = 0;
  // Records an attempt of delivery `id` with its `outcome` (e.g. "200", "connection refused"):
  // made (`delivered`), to be tried again at `retry_at_ms`, or given up (no `retry_at_ms`).
  // The webhook's last status becomes `outcome`. OK if the delivery is gone (its webhook was
  // deleted meanwhile).
  virtual absl::Status RecordDeliveryAttempt(int64_t id, TimeMs at_ms, const std::string& outcome,
                                             bool delivered, std::optional<TimeMs> retry_at_ms) = 0;
};

// Experiments (hyperparameter searches) and the link to their trials, which are jobs with
// JobRecord::experiment set.
class ExperimentStore {
 public:
  virtual ~ExperimentStore() = default;

  // Inserts a new experiment at revision 1. AlreadyExists if the id is taken.
  virtual absl::Status CreateExperiment(const ExperimentRecord& experiment) = 0;
  // NotFound if there is no such experiment.
  virtual absl::StatusOr<ExperimentRecord> GetExperiment(const std::string& id) = 0;
  // In creation order; all tenants' when `tenant` is empty.
  virtual absl::StatusOr<std::vector<ExperimentRecord>> ListExperiments(
      const std::string& tenant = "") = 0;
  // The RUNNING experiments, in creation order: what a control round drives.
  virtual absl::StatusOr<std::vector<ExperimentRecord>> ListActiveExperiments() = 0;
  // How many experiments `tenant` has in the store, and how many of them are RUNNING: what its
  // experiment limits are checked against, without reading the experiments.
  struct ExperimentCounts {
    int64_t total = 0;
    int64_t running = 0;
  };
  virtual absl::StatusOr<ExperimentCounts> CountExperiments(const std::string& tenant) = 0;
  // Writes what changes of an experiment (state, reason, search state, best and delivered
  // trials, targets met, updated_ms) if the stored revision is `experiment.revision`, which then
  // goes up by one in the store and in `experiment`. NotFound for an unknown experiment;
  // FailedPrecondition if it was written since it was read (read it again).
  virtual absl::Status UpdateExperiment(ExperimentRecord& experiment) = 0;
  // Atomically: UpdateExperiment(experiment) and CreateJob(trial, reason), so that a search's
  // stored state never names a trial without its job, nor a job a trial the search has not
  // started. `trial.experiment` must be the experiment's id (InvalidArgument otherwise); the
  // errors of both; nothing is written on any.
  virtual absl::Status StartTrial(ExperimentRecord& experiment, const JobRecord& trial,
                                  const std::string& reason) = 0;
  // The jobs of the experiment's trials, by trial number. NotFound for an unknown experiment.
  virtual absl::StatusOr<std::vector<JobRecord>> ListTrials(const std::string& id) = 0;
  // Removes the experiment. NotFound if unknown; FailedPrecondition while a job of one of its
  // trials remains (the caller deletes those first, with their files).
  virtual absl::Status DeleteExperiment(const std::string& id) = 0;
};

// The whole store: every role. Virtual bases, so an implementation may serve each role with its
// own class (store/sql_store.h).
class Store : public virtual JobStore,
              public virtual JobRecordStore,
              public virtual TenantStore,
              public virtual ArtifactStore,
              public virtual WebhookStore,
              public virtual ExperimentStore {};

}  // namespace weft
