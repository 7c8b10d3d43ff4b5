// Store on an embedded SQLite database: WAL journal, synchronous=FULL (a commit that returned
// is on disk), foreign keys on. The default store of a single weftd.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "store/store.h"

struct sqlite3;

namespace weft {
namespace sqlite {
class StatementCache;
}

class SqliteStore : public Store {
 public:
  // Opens (creating if needed) the database at `path` and migrates its schema.
  // Internal with SQLite's message if the file cannot be opened or is not a weft database.
  // `max_bytes` > 0 caps the database's size (in pages of SQLite's page size): a write beyond it
  // fails as on a full disk. Every write that fails for room — the cap or the disk — is
  // ResourceExhausted and changes nothing (its transaction is rolled back).
  static absl::StatusOr<std::unique_ptr<SqliteStore>> Open(const std::string& path,
                                                           int64_t max_bytes = 0);
  ~SqliteStore() override;
  SqliteStore(const SqliteStore&) = delete;
  SqliteStore& operator=(const SqliteStore&) = delete;

  absl::Status CreateJob(const JobRecord& record, const std::string& reason) override;
  absl::StatusOr<JobRecord> GetJob(const std::string& id) override;
  absl::StatusOr<std::vector<JobRecord>> ListJobs(const std::string& tenant,
                                                  const JobPage& page) override;
  absl::StatusOr<std::vector<JobRecord>> ListActiveJobs() override;
  absl::StatusOr<JobCounts> CountJobs(const std::string& tenant) override;
  absl::Status TransitionJob(const JobRecord& record, JobState expected_from) override;
  absl::Status UpdateJob(const JobRecord& record) override;
  absl::Status DeleteJob(const std::string& id) override;
  absl::StatusOr<std::vector<StateEvent>> History(const std::string& id) override;
  absl::Status AppendMetrics(const std::string& id,
                             const std::vector<MetricRecord>& points) override;
  absl::Status PutModel(const std::string& id, const ModelRecord& model) override;
  absl::StatusOr<std::vector<ModelRecord>> Models(const std::string& id) override;
  absl::StatusOr<MetricPage> MetricRange(const std::string& id, int64_t from,
                                         int64_t limit) override;
  // One critical section: no write of this store comes between its four queries.
  absl::StatusOr<JobSnapshot> GetJobSnapshot(const std::string& id, int64_t metrics_limit) override;
  absl::Status PutCheckpoint(const std::string& id, const CheckpointRecord& checkpoint) override;
  absl::StatusOr<std::vector<CheckpointRecord>> Checkpoints(const std::string& id) override;
  absl::Status DeleteCheckpoint(const std::string& id, int64_t step) override;
  absl::Status CreateTenant(const TenantRecord& tenant) override;
  absl::StatusOr<TenantRecord> GetTenant(const std::string& name) override;
  absl::StatusOr<std::vector<TenantRecord>> ListTenants() override;
  absl::Status UpdateTenant(const TenantRecord& tenant) override;
  absl::Status DeleteTenant(const std::string& name) override;
  absl::Status PutImage(const ImageRecord& image) override;
  absl::StatusOr<ImageRecord> GetImage(const std::string& owner, const std::string& name) override;
  absl::StatusOr<std::vector<ImageRecord>> ListImages() override;
  absl::Status DeleteImage(const std::string& owner, const std::string& name) override;
  absl::Status PutDataset(const DatasetRecord& dataset) override;
  absl::StatusOr<DatasetRecord> GetDataset(const std::string& name) override;
  absl::StatusOr<std::vector<DatasetRecord>> ListDatasets() override;
  absl::Status DeleteDataset(const std::string& name) override;
  absl::Status CreateWebhook(const WebhookRecord& webhook, int max_per_tenant) override;
  absl::StatusOr<std::vector<WebhookRecord>> ListWebhooks(const std::string& tenant) override;
  absl::Status DeleteWebhook(const std::string& tenant, const std::string& id) override;
  absl::StatusOr<std::vector<WebhookDelivery>> DueDeliveries(TimeMs now_ms, int limit) override;
  absl::Status RecordDeliveryAttempt(int64_t id, TimeMs at_ms, const std::string& outcome,
                                     bool delivered, std::optional<TimeMs> retry_at_ms) override;
  absl::Status PutArtifact(const ArtifactRecord& artifact) override;
  absl::StatusOr<ArtifactRecord> GetArtifact(const std::string& tenant,
                                             const std::string& name) override;
  absl::StatusOr<std::vector<ArtifactRecord>> ListArtifacts(const std::string& tenant) override;
  absl::StatusOr<int64_t> DeleteArtifact(const std::string& tenant,
                                         const std::string& name) override;
  absl::Status CreateToken(const TokenRecord& token) override;
  absl::StatusOr<TokenRecord> FindToken(const std::string& sha256) override;
  absl::StatusOr<std::vector<TokenRecord>> ListTokens(const std::string& tenant) override;
  absl::Status RevokeToken(const std::string& tenant, const std::string& id, TimeMs when) override;

 private:
  explicit SqliteStore(sqlite3* db);
  absl::Status Migrate();
  absl::Status LimitSize(int64_t max_bytes);
  // Runs SQL text (no bound values).
  absl::Status Exec(const std::string& sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<JobRecord> GetJobLocked(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status AppendEventLocked(const std::string& id, TimeMs t, std::optional<JobState> from,
                                 JobState to, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status WriteJobLocked(const JobRecord& r, bool insert) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Rows about job `id` (sqlite_store_records.cc); NotFound for an unknown job.
  template <typename T, typename Read, typename... Args>
  absl::StatusOr<std::vector<T>> JobRowsLocked(const std::string& id, const std::string& what,
                                               const std::string& sql, Read read,
                                               const Args&... args)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  sqlite3* const db_ ABSL_GUARDED_BY(mu_);  // each public call is one critical section
  const std::unique_ptr<sqlite::StatementCache> stmts_ ABSL_PT_GUARDED_BY(mu_);
  // Tokens FindToken has read, by digest, so an authenticated request costs no query. Filled and
  // emptied only while mu_ is held too: every write to the tokens table (RevokeToken,
  // DeleteTenant) empties it in the same critical section, so no stale entry survives one. No
  // other process writes weft.db. At most kMaxCachedTokens entries (then it starts over).
  absl::Mutex tokens_mu_ ABSL_ACQUIRED_AFTER(mu_);
  std::unordered_map<std::string, TokenRecord> tokens_ ABSL_GUARDED_BY(tokens_mu_);
  static constexpr size_t kMaxCachedTokens = 100000;
  void ForgetTokensLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes `tenant` from every data set's list of tenants (inside DeleteTenant's transaction).
  absl::Status ForgetTenantInDatasetsLocked(const std::string& tenant)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
};

}  // namespace weft
