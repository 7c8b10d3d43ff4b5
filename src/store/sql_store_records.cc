// The store: what belongs to a job besides its record (state history, metric points, models,
// checkpoints). Every call checks the job exists first (NotFound otherwise).
#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "store/sql_store.h"

namespace weft::sql_store {
namespace {

StateEvent ReadEvent(const sql::Row& row) {
  StateEvent e;
  e.seq = row.Int(0);
  e.time_ms = row.Int(1);
  if (!row.IsNull(2)) e.from = ParseJobState(row.Text(2));
  e.to = ParseJobState(row.Text(3)).value_or(JobState::kFailed);
  e.reason = row.Text(4);
  return e;
}

MetricRecord ReadMetric(const sql::Row& row) {
  return {row.Int(0),     static_cast<int>(row.Int(1)),
          row.Int(2),     row.Real(3),
          row.Real(4),    row.OptReal(5),
          row.OptReal(6), static_cast<int>(row.Int(7))};
}

ModelRecord ReadModel(const sql::Row& row) {
  return {row.Text(0), row.Text(1), row.Text(2), row.Real(3), static_cast<int>(row.Int(4)),
          row.Int(5),  row.Int(6),  row.Int(7)};
}

CheckpointRecord ReadCheckpoint(const sql::Row& row) {
  return {row.Int(0), static_cast<int>(row.Int(1)), row.Text(2), row.Int(3), row.Int(4)};
}

constexpr char kSelectHistory[] =
    "SELECT seq, time_ms, from_state, to_state, reason FROM job_events WHERE job_id=$1 "
    "ORDER BY seq";
constexpr char kSelectMetrics[] =
    "SELECT step, epoch, wall_time_ms, train_loss, samples_per_s, test_accuracy, test_loss, "
    "world_size FROM (SELECT * FROM metrics WHERE job_id=$1 ORDER BY seq DESC LIMIT $2) m ORDER BY "
    "seq";
constexpr char kSelectModels[] =
    "SELECT kind, path, card_path, test_accuracy, epoch, step, bytes, created_ms "
    "FROM models WHERE job_id=$1 ORDER BY created_ms, kind";
constexpr char kSelectCheckpoints[] =
    "SELECT step, epoch, path, bytes, created_ms FROM checkpoints WHERE job_id=$1 "
    "ORDER BY step DESC";

// What a metric value is kept as: SQLite cannot hold a NaN (it binds one as NULL), so a NaN
// loss or rate is kept as +infinity (JSON shows both as null) and a NaN test metric as none.
double Kept(double v) { return std::isnan(v) ? std::numeric_limits<double>::infinity() : v; }
std::optional<double> Kept(std::optional<double> v) {
  return v && std::isnan(*v) ? std::nullopt : v;
}

// NotFound unless job `id` exists.
absl::Status JobExists(sql::Tx& tx, const std::string& id) {
  ASSIGN_OR_RETURN(int64_t n, tx.Count("find job", "SELECT COUNT(*) FROM jobs WHERE id=$1", id));
  if (n == 0) return absl::NotFoundError(absl::StrCat("no job ", id));
  return absl::OkStatus();
}

// The rows `sql` selects for job `id` (bound to $1), read with `read`, in one snapshot; NotFound
// for an unknown job.
template <typename T, typename Read>
absl::StatusOr<std::vector<T>> JobRows(sql::Database& db, const std::string& what,
                                       const std::string& id, const std::string& sql, Read read) {
  return db.Run(what, sql::Mode::kSnapshot, [&](sql::Tx& tx) -> absl::StatusOr<std::vector<T>> {
    RETURN_IF_ERROR(JobExists(tx, id));
    return tx.Query<T>(what, sql, read, id);
  });
}

// Runs `write(tx)` in a write transaction after checking job `id` exists.
template <typename Write>
absl::Status WriteForJob(sql::Database& db, const std::string& what, const std::string& id,
                         Write write) {
  return db.Run(what, sql::Mode::kWrite, [&](sql::Tx& tx) -> absl::Status {
    RETURN_IF_ERROR(JobExists(tx, id));
    return write(tx);
  });
}

}  // namespace

absl::StatusOr<std::vector<StateEvent>> JobRecords::History(const std::string& id) {
  return JobRows<StateEvent>(*db_, "read history", id, kSelectHistory, ReadEvent);
}

absl::Status JobRecords::AppendMetrics(const std::string& id,
                                       const std::vector<MetricRecord>& points) {
  return WriteForJob(*db_, "append metrics", id, [&](sql::Tx& tx) -> absl::Status {
    for (const MetricRecord& p : points) {
      RETURN_IF_ERROR(tx.Execute("append metrics",
                                 "INSERT INTO metrics (job_id, step, epoch, wall_time_ms, "
                                 "train_loss, samples_per_s, test_accuracy, test_loss, "
                                 "world_size) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9)",
                                 id, p.step, p.epoch, p.wall_time_ms, Kept(p.train_loss),
                                 Kept(p.samples_per_s), Kept(p.test_accuracy), Kept(p.test_loss),
                                 p.world_size)
                          .status());
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<JobRecordStore::MetricPage> JobRecords::MetricRange(const std::string& id,
                                                                   int64_t from, int64_t limit) {
  return db_->Run(
      "read metric range", sql::Mode::kSnapshot, [&](sql::Tx& tx) -> absl::StatusOr<MetricPage> {
        RETURN_IF_ERROR(JobExists(tx, id));
        MetricPage page;
        ASSIGN_OR_RETURN(page.total, tx.Count("count metrics",
                                              "SELECT COUNT(*) FROM metrics WHERE job_id=$1", id));
        const int64_t n = std::max<int64_t>(limit, 0);
        page.from = from >= 0 ? from : std::max<int64_t>(0, page.total - n);
        ASSIGN_OR_RETURN(page.points,
                         tx.Query<MetricRecord>(
                             "read metric range",
                             "SELECT step, epoch, wall_time_ms, train_loss, samples_per_s, "
                             "test_accuracy, test_loss, world_size FROM metrics WHERE job_id=$1 "
                             "ORDER BY seq "
                             "LIMIT $2 OFFSET $3",
                             ReadMetric, id, n, page.from));
        return page;
      });
}

absl::Status JobRecords::PutModel(const std::string& id, const ModelRecord& a) {
  return WriteForJob(*db_, "put model", id, [&](sql::Tx& tx) {
    return tx
        .Execute("put model",
                 "INSERT INTO models (job_id, kind, path, card_path, test_accuracy, epoch, step, "
                 "bytes, created_ms) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9) ON CONFLICT (job_id, "
                 "kind) DO UPDATE SET path=EXCLUDED.path, card_path=EXCLUDED.card_path, "
                 "test_accuracy=EXCLUDED.test_accuracy, epoch=EXCLUDED.epoch, "
                 "step=EXCLUDED.step, bytes=EXCLUDED.bytes, created_ms=EXCLUDED.created_ms",
                 id, a.kind, a.path, a.card_path, a.test_accuracy, a.epoch, a.step, a.bytes,
                 a.created_ms)
        .status();
  });
}

absl::StatusOr<std::vector<ModelRecord>> JobRecords::Models(const std::string& id) {
  return JobRows<ModelRecord>(*db_, "read models", id, kSelectModels, ReadModel);
}

absl::StatusOr<JobRecordStore::JobSnapshot> JobRecords::GetJobSnapshot(const std::string& id,
                                                                       int64_t metrics_limit) {
  const int64_t limit = metrics_limit > 0 ? metrics_limit : std::numeric_limits<int64_t>::max();
  return db_->Run(
      "read job", sql::Mode::kSnapshot, [&](sql::Tx& tx) -> absl::StatusOr<JobSnapshot> {
        JobSnapshot out;
        ASSIGN_OR_RETURN(out.job, GetJobIn(tx, id));
        ASSIGN_OR_RETURN(out.history,
                         tx.Query<StateEvent>("read history", kSelectHistory, ReadEvent, id));
        ASSIGN_OR_RETURN(out.metrics, tx.Query<MetricRecord>("read metrics", kSelectMetrics,
                                                             ReadMetric, id, limit));
        ASSIGN_OR_RETURN(out.models,
                         tx.Query<ModelRecord>("read models", kSelectModels, ReadModel, id));
        return out;
      });
}

absl::Status JobRecords::PutCheckpoint(const std::string& id, const CheckpointRecord& c) {
  return WriteForJob(*db_, "put checkpoint", id, [&](sql::Tx& tx) {
    return tx
        .Execute("put checkpoint",
                 "INSERT INTO checkpoints (job_id, step, epoch, path, bytes, created_ms) "
                 "VALUES ($1,$2,$3,$4,$5,$6) ON CONFLICT (job_id, step) DO UPDATE SET "
                 "epoch=EXCLUDED.epoch, path=EXCLUDED.path, bytes=EXCLUDED.bytes, "
                 "created_ms=EXCLUDED.created_ms",
                 id, c.step, c.epoch, c.path, c.bytes, c.created_ms)
        .status();
  });
}

absl::StatusOr<std::vector<CheckpointRecord>> JobRecords::Checkpoints(const std::string& id) {
  return JobRows<CheckpointRecord>(*db_, "read checkpoints", id, kSelectCheckpoints,
                                   ReadCheckpoint);
}

absl::Status JobRecords::DeleteCheckpoint(const std::string& id, int64_t step) {
  return db_->Run("delete checkpoint", sql::Mode::kWrite, [&](sql::Tx& tx) {
    return tx
        .Execute("delete checkpoint", "DELETE FROM checkpoints WHERE job_id=$1 AND step=$2", id,
                 step)
        .status();
  });
}

}  // namespace weft::sql_store
