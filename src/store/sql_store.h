// The store (store/store.h), written once over the SQL driver (store/sql.h): each role of the
// store is one class here, and SqlStore joins them over one database. SqliteStore and PgStore
// (sqlite_store.h, pg_store.h) only open their database.
//
// Each call is one transaction: writes in Mode::kWrite (fenced where the database fences),
// several reads that must agree in Mode::kSnapshot, a single read in Mode::kRead.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "store/sql.h"
#include "store/store.h"

namespace weft {
namespace sql_store {

// The job with this id, read in `tx` (its row locked for the transaction with `for_update`).
// NotFound for an unknown job.
absl::StatusOr<JobRecord> GetJobIn(sql::Tx& tx, const std::string& id, bool for_update = false);

// Inserts job `record` with its first history entry (-> record.state, `reason`) in `tx`.
// AlreadyExists if the id is taken.
absl::Status CreateJobIn(sql::Tx& tx, const JobRecord& record, const std::string& reason);

// The jobs matching `where` (SQL over the jobs table's columns with one parameter $1, `value`,
// and its ORDER BY), read in `tx`.
absl::StatusOr<std::vector<JobRecord>> ListJobsIn(sql::Tx& tx, const std::string& where,
                                                  const std::string& value);

class Jobs : public virtual JobStore {
 public:
  explicit Jobs(std::shared_ptr<sql::Database> db) : db_(std::move(db)) {}
  absl::Status CreateJob(const JobRecord& record, const std::string& reason) override;
  absl::StatusOr<JobRecord> GetJob(const std::string& id) override;
  absl::StatusOr<std::vector<JobRecord>> ListJobs(const std::string& tenant,
                                                  const JobPage& page) override;
  absl::StatusOr<std::vector<JobRecord>> ListActiveJobs() override;
  absl::StatusOr<JobCounts> CountJobs(const std::string& tenant) override;
  absl::Status TransitionJob(const JobRecord& record, JobState expected_from) override;
  absl::Status UpdateJob(const JobRecord& record) override;
  absl::Status DeleteJob(const std::string& id) override;

 private:
  const std::shared_ptr<sql::Database> db_;
};

class JobRecords : public virtual JobRecordStore {
 public:
  explicit JobRecords(std::shared_ptr<sql::Database> db) : db_(std::move(db)) {}
  absl::StatusOr<std::vector<StateEvent>> History(const std::string& id) override;
  absl::Status AppendMetrics(const std::string& id,
                             const std::vector<MetricRecord>& points) override;
  absl::StatusOr<MetricPage> MetricRange(const std::string& id, int64_t from,
                                         int64_t limit) override;
  absl::Status PutModel(const std::string& id, const ModelRecord& model) override;
  absl::StatusOr<std::vector<ModelRecord>> Models(const std::string& id) override;
  // As of one instant: one snapshot transaction.
  absl::StatusOr<JobSnapshot> GetJobSnapshot(const std::string& id, int64_t metrics_limit) override;
  absl::Status PutCheckpoint(const std::string& id, const CheckpointRecord& checkpoint) override;
  absl::StatusOr<std::vector<CheckpointRecord>> Checkpoints(const std::string& id) override;
  absl::Status DeleteCheckpoint(const std::string& id, int64_t step) override;

 private:
  const std::shared_ptr<sql::Database> db_;
};

class Tenants : public virtual TenantStore {
 public:
  // With `cache_tokens`, FindToken keeps what it read (for a database no other process writes:
  // SQLite, whose data directory weftd locks), filling it inside the read's transaction;
  // RevokeToken and DeleteTenant empty it after their write commits and before they return, so
  // no lookup that starts after they return sees a stale entry. Without, it asks the database
  // every time (another weftd on the same database may revoke a token).
  Tenants(std::shared_ptr<sql::Database> db, bool cache_tokens)
      : db_(std::move(db)), cache_tokens_(cache_tokens) {}
  absl::Status CreateTenant(const TenantRecord& tenant) override;
  absl::StatusOr<TenantRecord> GetTenant(const std::string& name) override;
  absl::StatusOr<std::vector<TenantRecord>> ListTenants() override;
  absl::Status UpdateTenant(const TenantRecord& tenant) override;
  absl::Status DeleteTenant(const std::string& name) override;
  absl::Status CreateToken(const TokenRecord& token) override;
  absl::StatusOr<TokenRecord> FindToken(const std::string& sha256) override;
  absl::StatusOr<std::vector<TokenRecord>> ListTokens(const std::string& tenant) override;
  absl::Status RevokeToken(const std::string& tenant, const std::string& id, TimeMs when) override;

 private:
  void ForgetTokens();

  const std::shared_ptr<sql::Database> db_;
  const bool cache_tokens_;
  // Tokens FindToken has read, by digest: at most kMaxCachedTokens (then it starts over).
  absl::Mutex tokens_mu_;
  std::unordered_map<std::string, TokenRecord> tokens_ ABSL_GUARDED_BY(tokens_mu_);
  static constexpr size_t kMaxCachedTokens = 100000;
};

class Artifacts : public virtual ArtifactStore {
 public:
  explicit Artifacts(std::shared_ptr<sql::Database> db) : db_(std::move(db)) {}
  absl::Status PutArtifact(const ArtifactRecord& artifact) override;
  absl::StatusOr<ArtifactRecord> GetArtifact(const std::string& tenant,
                                             const std::string& name) override;
  absl::StatusOr<std::vector<ArtifactRecord>> ListArtifacts(const std::string& tenant) override;
  absl::StatusOr<int64_t> DeleteArtifact(const std::string& tenant,
                                         const std::string& name) override;
  absl::Status PutDataset(const DatasetRecord& dataset) override;
  absl::StatusOr<DatasetRecord> GetDataset(const std::string& name) override;
  absl::StatusOr<std::vector<DatasetRecord>> ListDatasets() override;
  absl::Status DeleteDataset(const std::string& name) override;
  absl::Status PutImage(const ImageRecord& image) override;
  absl::StatusOr<ImageRecord> GetImage(const std::string& owner, const std::string& name) override;
  absl::StatusOr<std::vector<ImageRecord>> ListImages() override;
  absl::Status DeleteImage(const std::string& owner, const std::string& name) override;

 private:
  const std::shared_ptr<sql::Database> db_;
};

// Removes `tenant` from every data set's and admin's image's grant, and deletes its own images
// (inside DeleteTenant's transaction).
absl::Status ForgetTenantInGrantsIn(sql::Tx& tx, const std::string& tenant);

class Webhooks : public virtual WebhookStore {
 public:
  explicit Webhooks(std::shared_ptr<sql::Database> db) : db_(std::move(db)) {}
  absl::Status CreateWebhook(const WebhookRecord& webhook, int max_per_tenant) override;
  absl::StatusOr<std::vector<WebhookRecord>> ListWebhooks(const std::string& tenant) override;
  absl::Status DeleteWebhook(const std::string& tenant, const std::string& id) override;
  absl::StatusOr<std::vector<WebhookDelivery>> DueDeliveries(TimeMs now_ms, int limit) override;
  absl::Status RecordDeliveryAttempt(int64_t id, TimeMs at_ms, const std::string& outcome,
                                     bool delivered, std::optional<TimeMs> retry_at_ms) override;

 private:
  const std::shared_ptr<sql::Database> db_;
};

class Experiments : public virtual ExperimentStore {
 public:
  explicit Experiments(std::shared_ptr<sql::Database> db) : db_(std::move(db)) {}
  absl::Status CreateExperiment(const ExperimentRecord& experiment) override;
  absl::StatusOr<ExperimentRecord> GetExperiment(const std::string& id) override;
  absl::StatusOr<std::vector<ExperimentRecord>> ListExperiments(const std::string& tenant) override;
  absl::StatusOr<std::vector<ExperimentRecord>> ListActiveExperiments() override;
  absl::StatusOr<ExperimentCounts> CountExperiments(const std::string& tenant) override;
  absl::Status UpdateExperiment(ExperimentRecord& experiment) override;
  absl::Status StartTrial(ExperimentRecord& experiment, const JobRecord& trial,
                          const std::string& reason) override;
  absl::StatusOr<std::vector<JobRecord>> ListTrials(const std::string& id) override;
  absl::Status DeleteExperiment(const std::string& id) override;

 private:
  const std::shared_ptr<sql::Database> db_;
};

}  // namespace sql_store

class SqlStore : public Store,
                 public sql_store::Jobs,
                 public sql_store::JobRecords,
                 public sql_store::Tenants,
                 public sql_store::Artifacts,
                 public sql_store::Webhooks,
                 public sql_store::Experiments {
 public:
  // See sql_store::Tenants for `cache_tokens`.
  SqlStore(std::shared_ptr<sql::Database> db, bool cache_tokens)
      : Jobs(db),
        JobRecords(db),
        Tenants(db, cache_tokens),
        Artifacts(db),
        Webhooks(db),
        Experiments(db) {}
};

}  // namespace weft
