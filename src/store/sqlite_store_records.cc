// The SQLite store: what belongs to a job besides its record (metric points, model artifacts,
// checkpoints). Every call checks the job exists first (NotFound otherwise).
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "store/sqlite_query.h"
#include "store/sqlite_store.h"

namespace weft {

using sqlite::Execute;
using sqlite::Query;
using sqlite::Stmt;
using sqlite::Transaction;

namespace {

MetricRecord ReadMetric(Stmt& s) {
  return {s.Int(0),  static_cast<int>(s.Int(1)), s.Int(2),     s.Real(3),
          s.Real(4), s.OptReal(5),               s.OptReal(6)};
}

ArtifactRecord ReadArtifact(Stmt& s) {
  return {s.Text(0), s.Text(1), s.Text(2), s.Real(3), static_cast<int>(s.Int(4)),
          s.Int(5),  s.Int(6),  s.Int(7)};
}

CheckpointRecord ReadCheckpoint(Stmt& s) {
  return {s.Int(0), static_cast<int>(s.Int(1)), s.Text(2), s.Int(3), s.Int(4)};
}

}  // namespace

absl::Status SqliteStore::AppendMetrics(const std::string& id,
                                        const std::vector<MetricRecord>& points) {
  absl::MutexLock lock(&mu_);
  Transaction tx(db_);
  RETURN_IF_ERROR(tx.Begun());
  RETURN_IF_ERROR(GetJobLocked(id).status());
  for (const MetricRecord& p : points) {
    RETURN_IF_ERROR(Execute(db_, "append metrics",
                            "INSERT INTO metrics (job_id, step, epoch, wall_time_ms, train_loss, "
                            "samples_per_s, test_accuracy, test_loss) "
                            "VALUES (?1,?2,?3,?4,?5,?6,?7,?8)",
                            id, p.step, p.epoch, p.wall_time_ms, p.train_loss, p.samples_per_s,
                            p.test_accuracy, p.test_loss)
                        .status());
  }
  return tx.Commit();
}

absl::StatusOr<std::vector<MetricRecord>> SqliteStore::Metrics(const std::string& id,
                                                               int64_t limit) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(GetJobLocked(id).status());
  return Query<MetricRecord>(
      db_, "read metrics",
      "SELECT step, epoch, wall_time_ms, train_loss, samples_per_s, test_accuracy, test_loss "
      "FROM (SELECT * FROM metrics WHERE job_id=?1 ORDER BY seq DESC LIMIT ?2) ORDER BY seq",
      ReadMetric, id, limit > 0 ? limit : int64_t{-1});
}

absl::Status SqliteStore::PutArtifact(const std::string& id, const ArtifactRecord& a) {
  absl::MutexLock lock(&mu_);
  Transaction tx(db_);
  RETURN_IF_ERROR(tx.Begun());
  RETURN_IF_ERROR(GetJobLocked(id).status());
  RETURN_IF_ERROR(Execute(db_, "put artifact",
                          "INSERT OR REPLACE INTO artifacts (job_id, kind, path, card_path, "
                          "test_accuracy, epoch, step, bytes, created_ms) "
                          "VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9)",
                          id, a.kind, a.path, a.card_path, a.test_accuracy, a.epoch, a.step,
                          a.bytes, a.created_ms)
                      .status());
  return tx.Commit();
}

absl::StatusOr<std::vector<ArtifactRecord>> SqliteStore::Artifacts(const std::string& id) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(GetJobLocked(id).status());
  return Query<ArtifactRecord>(db_, "read artifacts",
                               "SELECT kind, path, card_path, test_accuracy, epoch, step, bytes, "
                               "created_ms FROM artifacts WHERE job_id=?1 ORDER BY created_ms, kind",
                               ReadArtifact, id);
}

absl::Status SqliteStore::PutCheckpoint(const std::string& id, const CheckpointRecord& c) {
  absl::MutexLock lock(&mu_);
  Transaction tx(db_);
  RETURN_IF_ERROR(tx.Begun());
  RETURN_IF_ERROR(GetJobLocked(id).status());
  RETURN_IF_ERROR(Execute(db_, "put checkpoint",
                          "INSERT OR REPLACE INTO checkpoints (job_id, step, epoch, path, bytes, "
                          "created_ms) VALUES (?1,?2,?3,?4,?5,?6)",
                          id, c.step, c.epoch, c.path, c.bytes, c.created_ms)
                      .status());
  return tx.Commit();
}

absl::StatusOr<std::vector<CheckpointRecord>> SqliteStore::Checkpoints(const std::string& id) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(GetJobLocked(id).status());
  return Query<CheckpointRecord>(db_, "read checkpoints",
                                 "SELECT step, epoch, path, bytes, created_ms FROM checkpoints "
                                 "WHERE job_id=?1 ORDER BY step DESC",
                                 ReadCheckpoint, id);
}

absl::Status SqliteStore::DeleteCheckpoint(const std::string& id, int64_t step) {
  absl::MutexLock lock(&mu_);
  return Execute(db_, "delete checkpoint", "DELETE FROM checkpoints WHERE job_id=?1 AND step=?2",
                 id, step)
      .status();
}

}  // namespace weft
