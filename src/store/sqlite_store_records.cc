// The SQLite store: what belongs to a job besides its record (state history, metric points,
// models, checkpoints). Every call checks the job exists first (NotFound otherwise).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "store/sqlite_query.h"
#include "store/sqlite_store.h"

namespace weft {

namespace {

StateEvent ReadEvent(sqlite::Stmt& s) {
  StateEvent e;
  e.seq = s.Int(0);
  e.time_ms = s.Int(1);
  if (!s.IsNull(2)) e.from = ParseJobState(s.Text(2));
  e.to = ParseJobState(s.Text(3)).value_or(JobState::kFailed);
  e.reason = s.Text(4);
  return e;
}

MetricRecord ReadMetric(sqlite::Stmt& s) {
  return {s.Int(0),    static_cast<int>(s.Int(1)), s.Int(2), s.Real(3), s.Real(4), s.OptReal(5),
          s.OptReal(6)};
}

ModelRecord ReadModel(sqlite::Stmt& s) {
  return {s.Text(0), s.Text(1), s.Text(2), s.Real(3), static_cast<int>(s.Int(4)),
          s.Int(5),  s.Int(6),  s.Int(7)};
}

CheckpointRecord ReadCheckpoint(sqlite::Stmt& s) {
  return {s.Int(0), static_cast<int>(s.Int(1)), s.Text(2), s.Int(3), s.Int(4)};
}

}  // namespace

// The rows `sql` selects for job `id` (bound to ?1, then `args`), read with `read`. NotFound
// for an unknown job.
template <typename T, typename Read, typename... Args>
absl::StatusOr<std::vector<T>> SqliteStore::JobRowsLocked(const std::string& id,
                                                          const std::string& what,
                                                          const std::string& sql, Read read,
                                                          const Args&... args) {
  RETURN_IF_ERROR(GetJobLocked(id).status());
  return sqlite::Query<T>(*stmts_, what, sql, read, id, args...);
}

namespace {
constexpr char kSelectHistory[] =
    "SELECT seq, time_ms, from_state, to_state, reason FROM job_events WHERE job_id=?1 "
    "ORDER BY seq";
constexpr char kSelectMetrics[] =
    "SELECT step, epoch, wall_time_ms, train_loss, samples_per_s, test_accuracy, test_loss "
    "FROM (SELECT * FROM metrics WHERE job_id=?1 ORDER BY seq DESC LIMIT ?2) ORDER BY seq";
constexpr char kSelectModels[] =
    "SELECT kind, path, card_path, test_accuracy, epoch, step, bytes, created_ms "
    "FROM models WHERE job_id=?1 ORDER BY created_ms, kind";
}  // namespace

absl::StatusOr<std::vector<StateEvent>> SqliteStore::History(const std::string& id) {
  absl::MutexLock lock(&mu_);
  return JobRowsLocked<StateEvent>(id, "read history", kSelectHistory, ReadEvent);
}

absl::Status SqliteStore::AppendMetrics(const std::string& id,
                                        const std::vector<MetricRecord>& points) {
  absl::MutexLock lock(&mu_);
  sqlite::Transaction tx(db_);
  RETURN_IF_ERROR(tx.Begun());
  RETURN_IF_ERROR(GetJobLocked(id).status());
  for (const MetricRecord& p : points) {
    RETURN_IF_ERROR(
        sqlite::Execute(*stmts_, "append metrics",
                        "INSERT INTO metrics (job_id, step, epoch, wall_time_ms, train_loss, "
                        "samples_per_s, test_accuracy, test_loss) "
                        "VALUES (?1,?2,?3,?4,?5,?6,?7,?8)",
                        id, p.step, p.epoch, p.wall_time_ms, p.train_loss, p.samples_per_s,
                        p.test_accuracy, p.test_loss)
            .status());
  }
  return tx.Commit();
}

absl::StatusOr<Store::MetricPage> SqliteStore::MetricRange(const std::string& id, int64_t from,
                                                           int64_t limit) {
  absl::MutexLock lock(&mu_);
  MetricPage page;
  ASSIGN_OR_RETURN(
      std::vector<int64_t> count,
      JobRowsLocked<int64_t>(id, "count metrics", "SELECT COUNT(*) FROM metrics WHERE job_id=?1",
                             [](sqlite::Stmt& s) { return s.Int(0); }));
  page.total = count.empty() ? 0 : count[0];
  limit = std::max<int64_t>(limit, 0);
  page.from = from >= 0 ? from : std::max<int64_t>(0, page.total - limit);
  ASSIGN_OR_RETURN(
      page.points,
      sqlite::Query<MetricRecord>(
          *stmts_, "read metric range",
          "SELECT step, epoch, wall_time_ms, train_loss, samples_per_s, test_accuracy, test_loss "
          "FROM metrics WHERE job_id=?1 ORDER BY seq LIMIT ?2 OFFSET ?3",
          ReadMetric, id, limit, page.from));
  return page;
}

absl::Status SqliteStore::PutModel(const std::string& id, const ModelRecord& a) {
  absl::MutexLock lock(&mu_);
  sqlite::Transaction tx(db_);
  RETURN_IF_ERROR(tx.Begun());
  RETURN_IF_ERROR(GetJobLocked(id).status());
  RETURN_IF_ERROR(sqlite::Execute(*stmts_, "put model",
                                  "INSERT OR REPLACE INTO models (job_id, kind, path, card_path, "
                                  "test_accuracy, epoch, step, bytes, created_ms) "
                                  "VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9)",
                                  id, a.kind, a.path, a.card_path, a.test_accuracy, a.epoch, a.step,
                                  a.bytes, a.created_ms)
                      .status());
  return tx.Commit();
}

absl::StatusOr<std::vector<ModelRecord>> SqliteStore::Models(const std::string& id) {
  absl::MutexLock lock(&mu_);
  return JobRowsLocked<ModelRecord>(id, "read models", kSelectModels, ReadModel);
}

absl::StatusOr<Store::JobSnapshot> SqliteStore::GetJobSnapshot(const std::string& id,
                                                               int64_t metrics_limit) {
  absl::MutexLock lock(&mu_);
  JobSnapshot out;
  ASSIGN_OR_RETURN(out.job, GetJobLocked(id));
  ASSIGN_OR_RETURN(out.history, sqlite::Query<StateEvent>(*stmts_, "read history", kSelectHistory,
                                                          ReadEvent, id));
  ASSIGN_OR_RETURN(out.metrics, sqlite::Query<MetricRecord>(
                                    *stmts_, "read metrics", kSelectMetrics, ReadMetric, id,
                                    metrics_limit > 0 ? metrics_limit : int64_t{-1}));
  ASSIGN_OR_RETURN(
      out.models, sqlite::Query<ModelRecord>(*stmts_, "read models", kSelectModels, ReadModel, id));
  return out;
}

absl::Status SqliteStore::PutCheckpoint(const std::string& id, const CheckpointRecord& c) {
  absl::MutexLock lock(&mu_);
  sqlite::Transaction tx(db_);
  RETURN_IF_ERROR(tx.Begun());
  RETURN_IF_ERROR(GetJobLocked(id).status());
  RETURN_IF_ERROR(
      sqlite::Execute(*stmts_, "put checkpoint",
                      "INSERT OR REPLACE INTO checkpoints (job_id, step, epoch, path, bytes, "
                      "created_ms) VALUES (?1,?2,?3,?4,?5,?6)",
                      id, c.step, c.epoch, c.path, c.bytes, c.created_ms)
          .status());
  return tx.Commit();
}

absl::StatusOr<std::vector<CheckpointRecord>> SqliteStore::Checkpoints(const std::string& id) {
  absl::MutexLock lock(&mu_);
  return JobRowsLocked<CheckpointRecord>(
      id, "read checkpoints",
      "SELECT step, epoch, path, bytes, created_ms FROM checkpoints WHERE job_id=?1 "
      "ORDER BY step DESC",
      ReadCheckpoint);
}

absl::Status SqliteStore::DeleteCheckpoint(const std::string& id, int64_t step) {
  absl::MutexLock lock(&mu_);
  return sqlite::Execute(*stmts_, "delete checkpoint",
                         "DELETE FROM checkpoints WHERE job_id=?1 AND step=?2", id, step)
      .status();
}

}  // namespace weft
