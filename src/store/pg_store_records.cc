// The PostgreSQL store: what belongs to a job besides its record (state history, metric points,
// models, checkpoints). Every call checks the job exists first (NotFound otherwise).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "store/pg_store.h"
#include "store/pg_store_run.h"

namespace weft {

namespace {

StateEvent ReadEvent(const pqxx::row& row) {
  StateEvent e;
  e.seq = row[0].as<int64_t>();
  e.time_ms = row[1].as<int64_t>();
  if (!row[2].is_null()) e.from = ParseJobState(pg::Str(row[2]));
  e.to = ParseJobState(pg::Str(row[3])).value_or(JobState::kFailed);
  e.reason = pg::Str(row[4]);
  return e;
}

MetricRecord ReadMetric(const pqxx::row& row) {
  return {row[0].as<int64_t>(), row[1].as<int>(),    row[2].as<int64_t>(), row[3].as<double>(),
          row[4].as<double>(),  pg::OptReal(row[5]), pg::OptReal(row[6])};
}

ModelRecord ReadModel(const pqxx::row& row) {
  return {pg::Str(row[0]),  pg::Str(row[1]),      pg::Str(row[2]),      row[3].as<double>(),
          row[4].as<int>(), row[5].as<int64_t>(), row[6].as<int64_t>(), row[7].as<int64_t>()};
}

CheckpointRecord ReadCheckpoint(const pqxx::row& row) {
  return {row[0].as<int64_t>(), row[1].as<int>(), pg::Str(row[2]), row[3].as<int64_t>(),
          row[4].as<int64_t>()};
}

constexpr char kSelectHistory[] =
    "SELECT seq, time_ms, from_state, to_state, reason FROM job_events WHERE job_id=$1 "
    "ORDER BY seq";
constexpr char kSelectMetrics[] =
    "SELECT step, epoch, wall_time_ms, train_loss, samples_per_s, test_accuracy, test_loss "
    "FROM (SELECT * FROM metrics WHERE job_id=$1 ORDER BY seq DESC LIMIT $2) m ORDER BY seq";
constexpr char kSelectModels[] =
    "SELECT kind, path, card_path, test_accuracy, epoch, step, bytes, created_ms "
    "FROM models WHERE job_id=$1 ORDER BY created_ms, kind";

// NotFound unless job `id` exists.
absl::Status JobExists(pg::Tx& tx, const std::string& id) {
  if (tx.Exec("SELECT 1 FROM jobs WHERE id=$1", id).empty()) {
    return absl::NotFoundError(absl::StrCat("no job ", id));
  }
  return absl::OkStatus();
}

// The rows `sql` selects for job `id` (bound to $1), read with `read`; NotFound for an unknown
// job.
template <typename T, typename Read>
absl::StatusOr<std::vector<T>> JobRows(pg::Tx& tx, const std::string& id, const std::string& sql,
                                       Read read) {
  RETURN_IF_ERROR(JobExists(tx, id));
  return tx.Query<T>(sql, read, id);
}

}  // namespace

absl::StatusOr<std::vector<StateEvent>> PgStore::History(const std::string& id) {
  return Run("read history", Mode::kSnapshot,
             [&](pg::Tx& tx) { return JobRows<StateEvent>(tx, id, kSelectHistory, ReadEvent); });
}

absl::Status PgStore::AppendMetrics(const std::string& id,
                                    const std::vector<MetricRecord>& points) {
  return Run("append metrics", Mode::kWrite, [&](pg::Tx& tx) -> absl::Status {
    RETURN_IF_ERROR(JobExists(tx, id));
    for (const MetricRecord& p : points) {
      tx.Exec(
          "INSERT INTO metrics (job_id, step, epoch, wall_time_ms, train_loss, samples_per_s, "
          "test_accuracy, test_loss) VALUES ($1,$2,$3,$4,$5,$6,$7,$8)",
          id, p.step, p.epoch, p.wall_time_ms, p.train_loss, p.samples_per_s, p.test_accuracy,
          p.test_loss);
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<Store::MetricPage> PgStore::MetricRange(const std::string& id, int64_t from,
                                                       int64_t limit) {
  return Run("read metric range", Mode::kSnapshot, [&](pg::Tx& tx) -> absl::StatusOr<MetricPage> {
    RETURN_IF_ERROR(JobExists(tx, id));
    MetricPage page;
    page.total = tx.Count("SELECT COUNT(*) FROM metrics WHERE job_id=$1", id);
    const int64_t n = std::max<int64_t>(limit, 0);
    page.from = from >= 0 ? from : std::max<int64_t>(0, page.total - n);
    page.points = tx.Query<MetricRecord>(
        "SELECT step, epoch, wall_time_ms, train_loss, samples_per_s, test_accuracy, test_loss "
        "FROM metrics WHERE job_id=$1 ORDER BY seq LIMIT $2 OFFSET $3",
        ReadMetric, id, n, page.from);
    return page;
  });
}

absl::Status PgStore::PutModel(const std::string& id, const ModelRecord& a) {
  return Run("put model", Mode::kWrite, [&](pg::Tx& tx) -> absl::Status {
    RETURN_IF_ERROR(JobExists(tx, id));
    tx.Exec(
        "INSERT INTO models (job_id, kind, path, card_path, test_accuracy, epoch, step, bytes, "
        "created_ms) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9) ON CONFLICT (job_id, kind) DO UPDATE "
        "SET path=EXCLUDED.path, card_path=EXCLUDED.card_path, "
        "test_accuracy=EXCLUDED.test_accuracy, epoch=EXCLUDED.epoch, step=EXCLUDED.step, "
        "bytes=EXCLUDED.bytes, created_ms=EXCLUDED.created_ms",
        id, a.kind, a.path, a.card_path, a.test_accuracy, a.epoch, a.step, a.bytes, a.created_ms);
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<ModelRecord>> PgStore::Models(const std::string& id) {
  return Run("read models", Mode::kSnapshot,
             [&](pg::Tx& tx) { return JobRows<ModelRecord>(tx, id, kSelectModels, ReadModel); });
}

absl::StatusOr<Store::JobSnapshot> PgStore::GetJobSnapshot(const std::string& id,
                                                           int64_t metrics_limit) {
  // LIMIT NULL is no limit.
  const std::optional<int64_t> limit =
      metrics_limit > 0 ? std::optional<int64_t>(metrics_limit) : std::nullopt;
  return Run("read job", Mode::kSnapshot, [&](pg::Tx& tx) -> absl::StatusOr<JobSnapshot> {
    JobSnapshot out;
    ASSIGN_OR_RETURN(out.job, GetJobIn(tx, id));
    out.history = tx.Query<StateEvent>(kSelectHistory, ReadEvent, id);
    out.metrics = tx.Query<MetricRecord>(kSelectMetrics, ReadMetric, id, limit);
    out.models = tx.Query<ModelRecord>(kSelectModels, ReadModel, id);
    return out;
  });
}

absl::Status PgStore::PutCheckpoint(const std::string& id, const CheckpointRecord& c) {
  return Run("put checkpoint", Mode::kWrite, [&](pg::Tx& tx) -> absl::Status {
    RETURN_IF_ERROR(JobExists(tx, id));
    tx.Exec(
        "INSERT INTO checkpoints (job_id, step, epoch, path, bytes, created_ms) "
        "VALUES ($1,$2,$3,$4,$5,$6) ON CONFLICT (job_id, step) DO UPDATE SET "
        "epoch=EXCLUDED.epoch, path=EXCLUDED.path, bytes=EXCLUDED.bytes, "
        "created_ms=EXCLUDED.created_ms",
        id, c.step, c.epoch, c.path, c.bytes, c.created_ms);
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<CheckpointRecord>> PgStore::Checkpoints(const std::string& id) {
  return Run("read checkpoints", Mode::kSnapshot, [&](pg::Tx& tx) {
    return JobRows<CheckpointRecord>(
        tx, id,
        "SELECT step, epoch, path, bytes, created_ms FROM checkpoints WHERE job_id=$1 "
        "ORDER BY step DESC",
        ReadCheckpoint);
  });
}

absl::Status PgStore::DeleteCheckpoint(const std::string& id, int64_t step) {
  return Run("delete checkpoint", Mode::kWrite, [&](pg::Tx& tx) -> absl::Status {
    tx.Exec("DELETE FROM checkpoints WHERE job_id=$1 AND step=$2", id, step);
    return absl::OkStatus();
  });
}

}  // namespace weft
