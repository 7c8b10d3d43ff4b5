// Store on a PostgreSQL database (libpqxx): what a weftd uses when its metadata must outlive
// the host it runs on (weftd --store postgresql://…). Same behaviour as the SQLite store —
// the shared store test suite runs on both — with these differences:
//   - Writes are PostgreSQL transactions (READ COMMITTED; a transition reads the job's row
//     FOR UPDATE, so its compare-and-set holds against other writers of the same database).
//     A commit that returned is as durable as the server's synchronous_commit makes it.
//   - A status read (GetJobSnapshot) is one REPEATABLE READ, read-only transaction.
//   - Text is kept as UTF-8: bytes that are not (and NUL) are stored as U+FFFD.
//   - FindToken asks the database every time (no cache): another weftd on the same database
//     may revoke a token.
//   - Calls run on a pool of up to kMaxSessions connections, so requests do not queue behind
//     one another's round trips; each call is one transaction on one of them. A connection that
//     breaks is dropped with every idle one (they went with the same server); the call that saw
//     it fails with Unavailable, the next connects again.
//   - It elects a leader among the weftd that share it (store/leadership.h; pg_leadership.cc).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "store/leadership.h"
#include "store/store.h"

namespace weft {
namespace pg {
class Tx;
}

class PgStore : public Store, public Leadership {
 public:
  // Connects to the database `uri` names — a libpq connection URI (postgresql://user@host:port/
  // db?options, host may be a unix socket directory) — and migrates its schema
  // (store/pg_schema.h). Unavailable if the server cannot be reached or refuses the login;
  // FailedPrecondition if the database's schema is newer than this weftd's; Internal otherwise.
  static absl::StatusOr<std::unique_ptr<PgStore>> Open(const std::string& uri);
  ~PgStore() override;
  PgStore(const PgStore&) = delete;
  PgStore& operator=(const PgStore&) = delete;

  // "user@host:port/dbname" of the connection: what a log may show (never the password).
  std::string Describe();

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

  absl::StatusOr<Lease> Campaign(const Member& me, int64_t held_epoch, int64_t ttl_ms) override;
  void Fence(int64_t epoch, std::function<void(int64_t)> on_deposed) override;

  // What a call runs in: one statement on its own (no BEGIN/COMMIT round trips; for calls of a
  // single query), a read-only REPEATABLE READ transaction (several queries as of one instant),
  // or a read-write READ COMMITTED one that commits when the call's body returns OK — first
  // checking the fence (Fence) — or such a one without the check (a campaign for the lease).
  enum class Mode { kRead, kSnapshot, kWrite, kElection };
  struct Session;  // a connection and its prepared statements (pg_store_run.h)
  static constexpr int kMaxSessions = 4;

 private:
  explicit PgStore(std::string uri);
  absl::Status Migrate();
  // An idle session, or a new connection while fewer than kMaxSessions exist; waits for one
  // otherwise. Unavailable if the server cannot be reached.
  absl::StatusOr<std::unique_ptr<Session>> Acquire();
  // Back to the idle ones; a broken one is dropped with every idle one.
  void Release(std::unique_ptr<Session> session);
  // Runs `body(pg::Tx&)` (returning a Status or StatusOr) in one transaction of `mode`, under
  // mu_, with libpqxx's exceptions turned into a Status naming `what` (pg_store_run.h).
  template <typename Body>
  auto Run(const std::string& what, Mode mode, Body body)
      -> decltype(body(std::declval<pg::Tx&>()));
  // Helpers inside a transaction.
  static absl::StatusOr<JobRecord> GetJobIn(pg::Tx& tx, const std::string& id);
  static void WriteJobIn(pg::Tx& tx, const JobRecord& r, bool insert);
  static void AppendEventIn(pg::Tx& tx, const std::string& id, TimeMs t,
                            std::optional<JobState> from, JobState to, const std::string& reason);
  static void ForgetTenantInDatasetsIn(pg::Tx& tx, const std::string& tenant);
  // OK when no fence is set or the store's epoch is still the fenced one; FailedPrecondition
  // (and on_deposed_, once) otherwise. Holds the lease row FOR SHARE until the transaction ends,
  // so a takeover waits for the writes that passed the check.
  absl::Status CheckFence(pg::Tx& tx);

  const std::string uri_;
  absl::Mutex mu_;
  absl::CondVar released_;  // a session went back to idle_, or one was dropped
  std::vector<std::unique_ptr<Session>> idle_ ABSL_GUARDED_BY(mu_);
  int sessions_ ABSL_GUARDED_BY(mu_) = 0;  // idle or in use
  std::atomic<int64_t> fence_epoch_{0};    // 0: not fenced
  absl::Mutex fence_mu_;
  std::function<void(int64_t)> on_deposed_ ABSL_GUARDED_BY(fence_mu_);
};

}  // namespace weft
