#include "store/sqlite_store.h"

#include <sqlite3.h>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace weft {
namespace {

constexpr int kSchemaVersion = 4;

constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS jobs (
  id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  name TEXT NOT NULL,
  state TEXT NOT NULL,
  reason TEXT NOT NULL,
  manifest TEXT NOT NULL,
  spec_json TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  node TEXT NOT NULL,
  learner_pid INTEGER NOT NULL,
  epoch INTEGER NOT NULL,
  epochs_total INTEGER NOT NULL,
  step INTEGER NOT NULL,
  steps_total INTEGER NOT NULL,
  samples INTEGER NOT NULL,
  best_test_accuracy REAL,
  deliver_met_ms INTEGER,
  complete_met_ms INTEGER
);
CREATE INDEX IF NOT EXISTS jobs_by_tenant ON jobs(tenant, created_ms);
CREATE TABLE IF NOT EXISTS job_events (
  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  seq INTEGER NOT NULL,
  time_ms INTEGER NOT NULL,
  from_state TEXT,
  to_state TEXT NOT NULL,
  reason TEXT NOT NULL,
  PRIMARY KEY (job_id, seq)
);
CREATE TABLE IF NOT EXISTS metrics (
  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  step INTEGER NOT NULL,
  epoch INTEGER NOT NULL,
  wall_time_ms INTEGER NOT NULL,
  train_loss REAL NOT NULL,
  samples_per_s REAL NOT NULL,
  test_accuracy REAL,
  test_loss REAL
);
CREATE INDEX IF NOT EXISTS metrics_by_job ON metrics(job_id, seq);
CREATE TABLE IF NOT EXISTS artifacts (
  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  path TEXT NOT NULL,
  card_path TEXT NOT NULL,
  test_accuracy REAL NOT NULL,
  epoch INTEGER NOT NULL,
  step INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  created_ms INTEGER NOT NULL,
  PRIMARY KEY (job_id, kind)
);
)sql";

// Version 2: restart counts and checkpoints (fault tolerance).
constexpr char kSchemaV2[] = R"sql(
ALTER TABLE jobs ADD COLUMN restarts INTEGER NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS checkpoints (
  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  step INTEGER NOT NULL,
  epoch INTEGER NOT NULL,
  path TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  created_ms INTEGER NOT NULL,
  PRIMARY KEY (job_id, step)
);
)sql";

// Version 4: a job's learners (node and pid per rank) as JSON; `node` and `learner_pid` keep
// rank 0's for readers of version 3.
constexpr char kSchemaV4[] = R"sql(
ALTER TABLE jobs ADD COLUMN learners TEXT NOT NULL DEFAULT '[]';
)sql";

// Version 3: tenants and their bearer tokens (digests only).
constexpr char kSchemaV3[] = R"sql(
CREATE TABLE IF NOT EXISTS tenants (
  name TEXT PRIMARY KEY,
  has_quota INTEGER NOT NULL,
  quota_cpus REAL NOT NULL,
  quota_memory_mb INTEGER NOT NULL,
  quota_gpus INTEGER NOT NULL,
  weight REAL NOT NULL,
  created_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS tokens (
  id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  sha256 TEXT NOT NULL UNIQUE,
  created_ms INTEGER NOT NULL,
  revoked_ms INTEGER
);
)sql";

absl::Status SqlError(sqlite3* db, const std::string& what) {
  return absl::InternalError(absl::StrCat("sqlite: ", what, ": ", sqlite3_errmsg(db)));
}

// A prepared statement, finalized on scope exit. Bind* take 1-based indexes.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  absl::Status Prepared() const {
    return rc_ == SQLITE_OK ? absl::OkStatus() : SqlError(db_, "prepare");
  }
  void Bind(int i, const std::string& v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  void Bind(int i, int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  void Bind(int i, double v) { sqlite3_bind_double(stmt_, i, v); }
  void BindNull(int i) { sqlite3_bind_null(stmt_, i); }
  template <typename T>
  void BindOpt(int i, const std::optional<T>& v) {
    if (v) {
      Bind(i, *v);
    } else {
      BindNull(i);
    }
  }
  // SQLITE_ROW, SQLITE_DONE or an error code.
  int Step() { return sqlite3_step(stmt_); }
  absl::Status Run() {
    RETURN_IF_ERROR(Prepared());
    int rc = Step();
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) return SqlError(db_, "step");
    return absl::OkStatus();
  }
  std::string Text(int col) {
    const unsigned char* p = sqlite3_column_text(stmt_, col);
    return p ? std::string(reinterpret_cast<const char*>(p), sqlite3_column_bytes(stmt_, col))
             : std::string();
  }
  int64_t Int(int col) { return sqlite3_column_int64(stmt_, col); }
  double Real(int col) { return sqlite3_column_double(stmt_, col); }
  bool IsNull(int col) { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::optional<double> OptReal(int col) {
    return IsNull(col) ? std::nullopt : std::optional<double>(Real(col));
  }
  std::optional<int64_t> OptInt(int col) {
    return IsNull(col) ? std::nullopt : std::optional<int64_t>(Int(col));
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  int rc_;
};

// BEGIN IMMEDIATE ... COMMIT, rolled back unless Commit() succeeded.
class Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db) {
    ok_ = sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK;
  }
  ~Transaction() {
    if (ok_ && !committed_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  absl::Status Begun() const { return ok_ ? absl::OkStatus() : SqlError(db_, "begin"); }
  absl::Status Commit() {
    if (sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) {
      return SqlError(db_, "commit");
    }
    committed_ = true;
    return absl::OkStatus();
  }

 private:
  sqlite3* db_;
  bool ok_ = false;
  bool committed_ = false;
};

constexpr char kJobColumns[] =
    "id, tenant, name, state, reason, manifest, spec_json, created_ms, updated_ms, attempt, "
    "node, learner_pid, epoch, epochs_total, step, steps_total, samples, best_test_accuracy, "
    "deliver_met_ms, complete_met_ms, restarts, learners";

std::string LearnersJson(const std::vector<LearnerSlot>& learners) {
  nlohmann::json j = nlohmann::json::array();
  for (const LearnerSlot& l : learners) j.push_back({{"node", l.node}, {"pid", l.pid}});
  return j.dump();
}

// The learners column; a version-3 row (no learners yet) has rank 0 in node / learner_pid.
std::vector<LearnerSlot> ParseLearners(const std::string& text, const std::string& node,
                                       int64_t pid) {
  std::vector<LearnerSlot> out;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_array()) {
    for (const auto& l : j) {
      if (!l.is_object()) continue;
      out.push_back({l.value("node", std::string()), l.value("pid", int64_t{0})});
    }
  }
  if (out.empty() && !node.empty()) out.push_back({node, pid});
  return out;
}

JobRecord ReadJob(Stmt& s) {
  JobRecord r;
  r.id = s.Text(0);
  r.tenant = s.Text(1);
  r.name = s.Text(2);
  r.state = ParseJobState(s.Text(3)).value_or(JobState::kFailed);
  r.reason = s.Text(4);
  r.manifest = s.Text(5);
  r.spec_json = s.Text(6);
  r.created_ms = s.Int(7);
  r.updated_ms = s.Int(8);
  r.attempt = s.Int(9);
  r.progress.epoch = static_cast<int>(s.Int(12));
  r.progress.epochs_total = static_cast<int>(s.Int(13));
  r.progress.step = s.Int(14);
  r.progress.steps_total = s.Int(15);
  r.progress.samples = s.Int(16);
  r.best_test_accuracy = s.OptReal(17);
  r.deliver_met_ms = s.OptInt(18);
  r.complete_met_ms = s.OptInt(19);
  r.restarts = static_cast<int>(s.Int(20));
  r.learners = ParseLearners(s.Text(21), s.Text(10), s.Int(11));
  return r;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::string& path) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                           nullptr);
  if (rc != SQLITE_OK) {
    absl::Status s = absl::InternalError(
        absl::StrCat("cannot open store ", path, ": ", db ? sqlite3_errmsg(db) : "out of memory"));
    sqlite3_close(db);
    return s;
  }
  sqlite3_busy_timeout(db, 5000);
  std::unique_ptr<SqliteStore> store(new SqliteStore(db));
  RETURN_IF_ERROR(store->Migrate());
  return store;
}

SqliteStore::~SqliteStore() {
  std::lock_guard<std::mutex> lock(mu_);
  sqlite3_close(db_);
}

absl::Status SqliteStore::Exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return absl::InternalError(absl::StrCat("sqlite: ", msg));
  }
  return absl::OkStatus();
}

absl::Status SqliteStore::Migrate() {
  std::lock_guard<std::mutex> lock(mu_);
  RETURN_IF_ERROR(Exec("PRAGMA journal_mode=WAL"));
  RETURN_IF_ERROR(Exec("PRAGMA synchronous=FULL"));
  RETURN_IF_ERROR(Exec("PRAGMA foreign_keys=ON"));
  Stmt v(db_, "PRAGMA user_version");
  RETURN_IF_ERROR(v.Prepared());
  int64_t version = v.Step() == SQLITE_ROW ? v.Int(0) : 0;
  if (version > kSchemaVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("store schema version ", version, " is newer than this weftd understands (",
                     kSchemaVersion, "); upgrade weftd"));
  }
  if (version < kSchemaVersion) {
    Transaction tx(db_);
    RETURN_IF_ERROR(tx.Begun());
    if (version < 1) RETURN_IF_ERROR(Exec(kSchema));
    if (version < 2) RETURN_IF_ERROR(Exec(kSchemaV2));
    if (version < 3) RETURN_IF_ERROR(Exec(kSchemaV3));
    if (version < 4) RETURN_IF_ERROR(Exec(kSchemaV4));
    RETURN_IF_ERROR(Exec(absl::StrCat("PRAGMA user_version=", kSchemaVersion)));
    RETURN_IF_ERROR(tx.Commit());
  }
  return absl::OkStatus();
}

absl::Status SqliteStore::WriteJobLocked(const JobRecord& r, bool insert) {
  const char* sql =
      insert ? "INSERT INTO jobs (id, tenant, name, state, reason, manifest, spec_json, "
               "created_ms, updated_ms, attempt, node, learner_pid, epoch, epochs_total, step, "
               "steps_total, samples, best_test_accuracy, deliver_met_ms, complete_met_ms, "
               "restarts, learners) VALUES "
               "(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20,?21,?22)"
             : "UPDATE jobs SET tenant=?2, name=?3, state=?4, reason=?5, manifest=?6, "
               "spec_json=?7, created_ms=?8, updated_ms=?9, attempt=?10, node=?11, "
               "learner_pid=?12, epoch=?13, epochs_total=?14, step=?15, steps_total=?16, "
               "samples=?17, best_test_accuracy=?18, deliver_met_ms=?19, complete_met_ms=?20, "
               "restarts=?21, learners=?22 WHERE id=?1";
  Stmt s(db_, sql);
  RETURN_IF_ERROR(s.Prepared());
  s.Bind(1, r.id);
  s.Bind(2, r.tenant);
  s.Bind(3, r.name);
  s.Bind(4, std::string(JobStateName(r.state)));
  s.Bind(5, r.reason);
  s.Bind(6, r.manifest);
  s.Bind(7, r.spec_json);
  s.Bind(8, int64_t{r.created_ms});
  s.Bind(9, int64_t{r.updated_ms});
  s.Bind(10, r.attempt);
  s.Bind(11, r.learners.empty() ? std::string() : r.learners[0].node);
  s.Bind(12, r.learners.empty() ? int64_t{0} : r.learners[0].pid);
  s.Bind(13, int64_t{r.progress.epoch});
  s.Bind(14, int64_t{r.progress.epochs_total});
  s.Bind(15, r.progress.step);
  s.Bind(16, r.progress.steps_total);
  s.Bind(17, r.progress.samples);
  s.BindOpt(18, r.best_test_accuracy);
  s.BindOpt(19, r.deliver_met_ms);
  s.BindOpt(20, r.complete_met_ms);
  s.Bind(21, int64_t{r.restarts});
  s.Bind(22, LearnersJson(r.learners));
  int rc = s.Step();
  if (rc == SQLITE_CONSTRAINT) {
    return absl::AlreadyExistsError(absl::StrCat("job ", r.id, " already exists"));
  }
  if (rc != SQLITE_DONE) return SqlError(db_, "write job");
  return absl::OkStatus();
}

absl::Status SqliteStore::AppendEventLocked(const std::string& id, TimeMs t,
                                            std::optional<JobState> from, JobState to,
                                            const std::string& reason) {
  Stmt s(db_,
         "INSERT INTO job_events (job_id, seq, time_ms, from_state, to_state, reason) "
         "SELECT ?1, COALESCE(MAX(seq), 0) + 1, ?2, ?3, ?4, ?5 FROM job_events WHERE job_id=?1");
  RETURN_IF_ERROR(s.Prepared());
  s.Bind(1, id);
  s.Bind(2, int64_t{t});
  if (from) {
    s.Bind(3, std::string(JobStateName(*from)));
  } else {
    s.BindNull(3);
  }
  s.Bind(4, std::string(JobStateName(to)));
  s.Bind(5, reason);
  return s.Run();
}

absl::Status SqliteStore::CreateJob(const JobRecord& record, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  Transaction tx(db_);
  RETURN_IF_ERROR(tx.Begun());
  RETURN_IF_ERROR(WriteJobLocked(record, /*insert=*/true));
  RETURN_IF_ERROR(AppendEventLocked(record.id, record.created_ms, std::nullopt, record.state, reason));
  return tx.Commit();
}

absl::StatusOr<JobRecord> SqliteStore::GetJobLocked(const std::string& id) {
  Stmt s(db_, absl::StrCat("SELECT ", kJobColumns, " FROM jobs WHERE id=?1").c_str());
  RETURN_IF_ERROR(s.Prepared());
  s.Bind(1, id);
  int rc = s.Step();
  if (rc == SQLITE_DONE) return absl::NotFoundError(absl::StrCat("no job ", id));
  if (rc != SQLITE_ROW) return SqlError(db_, "read job");
  return ReadJob(s);
}

absl::StatusOr<JobRecord> SqliteStore::GetJob(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  return GetJobLocked(id);
}

absl::StatusOr<std::vector<JobRecord>> SqliteStore::ListJobs(const std::string& tenant) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string sql = absl::StrCat("SELECT ", kJobColumns, " FROM jobs ",
                                 tenant.empty() ? "" : "WHERE tenant=?1 ",
                                 "ORDER BY created_ms, id");
  Stmt s(db_, sql.c_str());
  RETURN_IF_ERROR(s.Prepared());
  if (!tenant.empty()) s.Bind(1, tenant);
  std::vector<JobRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) out.push_back(ReadJob(s));
  if (rc != SQLITE_DONE) return SqlError(db_, "list jobs");
  return out;
}

absl::Status SqliteStore::TransitionJob(const JobRecord& record, JobState expected_from) {
  std::lock_guard<std::mutex> lock(mu_);
  Transaction tx(db_);
  RETURN_IF_ERROR(tx.Begun());
  ASSIGN_OR_RETURN(JobRecord current, GetJobLocked(record.id));
  if (current.state != expected_from) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", record.id, " is ", JobStateName(current.state), ", not ",
                     JobStateName(expected_from)));
  }
  if (!CanTransition(expected_from, record.state)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", record.id, " cannot go from ", JobStateName(expected_from), " to ",
                     JobStateName(record.state)));
  }
  RETURN_IF_ERROR(WriteJobLocked(record, /*insert=*/false));
  RETURN_IF_ERROR(
      AppendEventLocked(record.id, record.updated_ms, expected_from, record.state, record.reason));
  return tx.Commit();
}

absl::Status SqliteStore::UpdateJob(const JobRecord& record) {
  std::lock_guard<std::mutex> lock(mu_);
  Transaction tx(db_);
  RETURN_IF_ERROR(tx.Begun());
  ASSIGN_OR_RETURN(JobRecord current, GetJobLocked(record.id));
  JobRecord merged = record;
  merged.state = current.state;
  merged.reason = current.reason;
  merged.updated_ms = current.updated_ms;
  RETURN_IF_ERROR(WriteJobLocked(merged, /*insert=*/false));
  return tx.Commit();
}

absl::Status SqliteStore::DeleteJob(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "DELETE FROM jobs WHERE id=?1");
  RETURN_IF_ERROR(s.Prepared());
  s.Bind(1, id);
  RETURN_IF_ERROR(s.Run());
  if (sqlite3_changes(db_) == 0) return absl::NotFoundError(absl::StrCat("no job ", id));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<StateEvent>> SqliteStore::History(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  RETURN_IF_ERROR(GetJobLocked(id).status());
  Stmt s(db_,
         "SELECT seq, time_ms, from_state, to_state, reason FROM job_events WHERE job_id=?1 "
         "ORDER BY seq");
  RETURN_IF_ERROR(s.Prepared());
  s.Bind(1, id);
  std::vector<StateEvent> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    StateEvent e;
    e.seq = s.Int(0);
    e.time_ms = s.Int(1);
    if (!s.IsNull(2)) e.from = ParseJobState(s.Text(2));
    e.to = ParseJobState(s.Text(3)).value_or(JobState::kFailed);
    e.reason = s.Text(4);
    out.push_back(std::move(e));
  }
  if (rc != SQLITE_DONE) return SqlError(db_, "read history");
  return out;
}

absl::Status SqliteStore::AppendMetrics(const std::string& id,
                                        const std::vector<MetricRecord>& points) {
  std::lock_guard<std::mutex> lock(mu_);
  Transaction tx(db_);
  RETURN_IF_ERROR(tx.Begun());
  RETURN_IF_ERROR(GetJobLocked(id).status());
  for (const MetricRecord& p : points) {
    Stmt s(db_,
           "INSERT INTO metrics (job_id, step, epoch, wall_time_ms, train_loss, samples_per_s, "
           "test_accuracy, test_loss) VALUES (?1,?2,?3,?4,?5,?6,?7,?8)");
    RETURN_IF_ERROR(s.Prepared());
    s.Bind(1, id);
    s.Bind(2, p.step);
    s.Bind(3, int64_t{p.epoch});
    s.Bind(4, int64_t{p.wall_time_ms});
    s.Bind(5, p.train_loss);
    s.Bind(6, p.samples_per_s);
    s.BindOpt(7, p.test_accuracy);
    s.BindOpt(8, p.test_loss);
    RETURN_IF_ERROR(s.Run());
  }
  return tx.Commit();
}

absl::StatusOr<std::vector<MetricRecord>> SqliteStore::Metrics(const std::string& id,
                                                               int64_t limit) {
  std::lock_guard<std::mutex> lock(mu_);
  RETURN_IF_ERROR(GetJobLocked(id).status());
  Stmt s(db_,
         "SELECT step, epoch, wall_time_ms, train_loss, samples_per_s, test_accuracy, test_loss "
         "FROM (SELECT * FROM metrics WHERE job_id=?1 ORDER BY seq DESC LIMIT ?2) ORDER BY seq");
  RETURN_IF_ERROR(s.Prepared());
  s.Bind(1, id);
  s.Bind(2, limit > 0 ? limit : int64_t{-1});
  std::vector<MetricRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    MetricRecord m;
    m.step = s.Int(0);
    m.epoch = static_cast<int>(s.Int(1));
    m.wall_time_ms = s.Int(2);
    m.train_loss = s.Real(3);
    m.samples_per_s = s.Real(4);
    m.test_accuracy = s.OptReal(5);
    m.test_loss = s.OptReal(6);
    out.push_back(m);
  }
  if (rc != SQLITE_DONE) return SqlError(db_, "read metrics");
  return out;
}

absl::Status SqliteStore::PutArtifact(const std::string& id, const ArtifactRecord& a) {
  std::lock_guard<std::mutex> lock(mu_);
  Transaction tx(db_);
  RETURN_IF_ERROR(tx.Begun());
  RETURN_IF_ERROR(GetJobLocked(id).status());
  Stmt s(db_,
         "INSERT OR REPLACE INTO artifacts (job_id, kind, path, card_path, test_accuracy, epoch, "
         "step, bytes, created_ms) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9)");
  RETURN_IF_ERROR(s.Prepared());
  s.Bind(1, id);
  s.Bind(2, a.kind);
  s.Bind(3, a.path);
  s.Bind(4, a.card_path);
  s.Bind(5, a.test_accuracy);
  s.Bind(6, int64_t{a.epoch});
  s.Bind(7, a.step);
  s.Bind(8, a.bytes);
  s.Bind(9, int64_t{a.created_ms});
  RETURN_IF_ERROR(s.Run());
  return tx.Commit();
}

absl::StatusOr<std::vector<ArtifactRecord>> SqliteStore::Artifacts(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  RETURN_IF_ERROR(GetJobLocked(id).status());
  Stmt s(db_,
         "SELECT kind, path, card_path, test_accuracy, epoch, step, bytes, created_ms FROM "
         "artifacts WHERE job_id=?1 ORDER BY created_ms, kind");
  RETURN_IF_ERROR(s.Prepared());
  s.Bind(1, id);
  std::vector<ArtifactRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    ArtifactRecord a;
    a.kind = s.Text(0);
    a.path = s.Text(1);
    a.card_path = s.Text(2);
    a.test_accuracy = s.Real(3);
    a.epoch = static_cast<int>(s.Int(4));
    a.step = s.Int(5);
    a.bytes = s.Int(6);
    a.created_ms = s.Int(7);
    out.push_back(a);
  }
  if (rc != SQLITE_DONE) return SqlError(db_, "read artifacts");
  return out;
}

absl::Status SqliteStore::PutCheckpoint(const std::string& id, const CheckpointRecord& c) {
  std::lock_guard<std::mutex> lock(mu_);
  Transaction tx(db_);
  RETURN_IF_ERROR(tx.Begun());
  RETURN_IF_ERROR(GetJobLocked(id).status());
  Stmt s(db_,
         "INSERT OR REPLACE INTO checkpoints (job_id, step, epoch, path, bytes, created_ms) "
         "VALUES (?1,?2,?3,?4,?5,?6)");
  RETURN_IF_ERROR(s.Prepared());
  s.Bind(1, id);
  s.Bind(2, c.step);
  s.Bind(3, int64_t{c.epoch});
  s.Bind(4, c.path);
  s.Bind(5, c.bytes);
  s.Bind(6, int64_t{c.created_ms});
  RETURN_IF_ERROR(s.Run());
  return tx.Commit();
}

absl::StatusOr<std::vector<CheckpointRecord>> SqliteStore::Checkpoints(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  RETURN_IF_ERROR(GetJobLocked(id).status());
  Stmt s(db_,
         "SELECT step, epoch, path, bytes, created_ms FROM checkpoints WHERE job_id=?1 "
         "ORDER BY step DESC");
  RETURN_IF_ERROR(s.Prepared());
  s.Bind(1, id);
  std::vector<CheckpointRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    out.push_back({s.Int(0), static_cast<int>(s.Int(1)), s.Text(2), s.Int(3), s.Int(4)});
  }
  if (rc != SQLITE_DONE) return SqlError(db_, "read checkpoints");
  return out;
}

absl::Status SqliteStore::DeleteCheckpoint(const std::string& id, int64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "DELETE FROM checkpoints WHERE job_id=?1 AND step=?2");
  RETURN_IF_ERROR(s.Prepared());
  s.Bind(1, id);
  s.Bind(2, step);
  return s.Run();
}

namespace {

TenantRecord ReadTenant(Stmt& s) {
  TenantRecord t;
  t.name = s.Text(0);
  t.has_quota = s.Int(1) != 0;
  t.quota_cpus = s.Real(2);
  t.quota_memory_mb = s.Int(3);
  t.quota_gpus = static_cast<int>(s.Int(4));
  t.weight = s.Real(5);
  t.created_ms = s.Int(6);
  return t;
}

TokenRecord ReadToken(Stmt& s) {
  TokenRecord t;
  t.id = s.Text(0);
  t.tenant = s.Text(1);
  t.sha256 = s.Text(2);
  t.created_ms = s.Int(3);
  t.revoked_ms = s.OptInt(4);
  return t;
}

constexpr char kTenantColumns[] =
    "SELECT name, has_quota, quota_cpus, quota_memory_mb, quota_gpus, weight, created_ms FROM tenants";
constexpr char kTokenColumns[] = "SELECT id, tenant, sha256, created_ms, revoked_ms FROM tokens";

}  // namespace

absl::Status SqliteStore::CreateTenant(const TenantRecord& t) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_,
         "INSERT INTO tenants (name, has_quota, quota_cpus, quota_memory_mb, quota_gpus, weight, "
         "created_ms) VALUES (?1,?2,?3,?4,?5,?6,?7)");
  RETURN_IF_ERROR(s.Prepared());
  s.Bind(1, t.name);
  s.Bind(2, int64_t{t.has_quota ? 1 : 0});
  s.Bind(3, t.quota_cpus);
  s.Bind(4, t.quota_memory_mb);
  s.Bind(5, int64_t{t.quota_gpus});
  s.Bind(6, t.weight);
  s.Bind(7, int64_t{t.created_ms});
  int rc = s.Step();
  if (rc == SQLITE_CONSTRAINT) return absl::AlreadyExistsError(absl::StrCat("tenant '", t.name, "' already exists"));
  if (rc != SQLITE_DONE) return SqlError(db_, "create tenant");
  return absl::OkStatus();
}

absl::StatusOr<TenantRecord> SqliteStore::GetTenant(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, absl::StrCat(kTenantColumns, " WHERE name=?1").c_str());
  RETURN_IF_ERROR(s.Prepared());
  s.Bind(1, name);
  int rc = s.Step();
  if (rc == SQLITE_ROW) return ReadTenant(s);
  if (rc == SQLITE_DONE) return absl::NotFoundError(absl::StrCat("no tenant '", name, "'"));
  return SqlError(db_, "get tenant");
}

absl::StatusOr<std::vector<TenantRecord>> SqliteStore::ListTenants() {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, absl::StrCat(kTenantColumns, " ORDER BY name").c_str());
  RETURN_IF_ERROR(s.Prepared());
  std::vector<TenantRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) out.push_back(ReadTenant(s));
  if (rc != SQLITE_DONE) return SqlError(db_, "list tenants");
  return out;
}

absl::Status SqliteStore::UpdateTenant(const TenantRecord& t) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_,
         "UPDATE tenants SET has_quota=?2, quota_cpus=?3, quota_memory_mb=?4, quota_gpus=?5, "
         "weight=?6 WHERE name=?1");
  RETURN_IF_ERROR(s.Prepared());
  s.Bind(1, t.name);
  s.Bind(2, int64_t{t.has_quota ? 1 : 0});
  s.Bind(3, t.quota_cpus);
  s.Bind(4, t.quota_memory_mb);
  s.Bind(5, int64_t{t.quota_gpus});
  s.Bind(6, t.weight);
  RETURN_IF_ERROR(s.Run());
  if (sqlite3_changes(db_) == 0) return absl::NotFoundError(absl::StrCat("no tenant '", t.name, "'"));
  return absl::OkStatus();
}

absl::Status SqliteStore::DeleteTenant(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  Transaction tx(db_);
  RETURN_IF_ERROR(tx.Begun());
  Stmt jobs(db_, "SELECT COUNT(*) FROM jobs WHERE tenant=?1");
  RETURN_IF_ERROR(jobs.Prepared());
  jobs.Bind(1, name);
  if (jobs.Step() != SQLITE_ROW) return SqlError(db_, "count jobs");
  if (int64_t n = jobs.Int(0); n > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("tenant '", name, "' still owns ", n, n == 1 ? " job" : " jobs", "; delete them first"));
  }
  Stmt del(db_, "DELETE FROM tenants WHERE name=?1");
  RETURN_IF_ERROR(del.Prepared());
  del.Bind(1, name);
  RETURN_IF_ERROR(del.Run());
  if (sqlite3_changes(db_) == 0) return absl::NotFoundError(absl::StrCat("no tenant '", name, "'"));
  Stmt toks(db_, "DELETE FROM tokens WHERE tenant=?1");
  RETURN_IF_ERROR(toks.Prepared());
  toks.Bind(1, name);
  RETURN_IF_ERROR(toks.Run());
  return tx.Commit();
}

absl::Status SqliteStore::CreateToken(const TokenRecord& t) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "INSERT INTO tokens (id, tenant, sha256, created_ms, revoked_ms) VALUES (?1,?2,?3,?4,?5)");
  RETURN_IF_ERROR(s.Prepared());
  s.Bind(1, t.id);
  s.Bind(2, t.tenant);
  s.Bind(3, t.sha256);
  s.Bind(4, int64_t{t.created_ms});
  s.BindOpt(5, t.revoked_ms);
  int rc = s.Step();
  if (rc == SQLITE_CONSTRAINT) return absl::AlreadyExistsError("token id or digest already exists");
  if (rc != SQLITE_DONE) return SqlError(db_, "create token");
  return absl::OkStatus();
}

absl::StatusOr<TokenRecord> SqliteStore::FindToken(const std::string& sha256) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, absl::StrCat(kTokenColumns, " WHERE sha256=?1").c_str());
  RETURN_IF_ERROR(s.Prepared());
  s.Bind(1, sha256);
  int rc = s.Step();
  if (rc == SQLITE_ROW) return ReadToken(s);
  if (rc == SQLITE_DONE) return absl::NotFoundError("no such token");
  return SqlError(db_, "find token");
}

absl::StatusOr<std::vector<TokenRecord>> SqliteStore::ListTokens(const std::string& tenant) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, absl::StrCat(kTokenColumns, " WHERE tenant=?1 ORDER BY created_ms, id").c_str());
  RETURN_IF_ERROR(s.Prepared());
  s.Bind(1, tenant);
  std::vector<TokenRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) out.push_back(ReadToken(s));
  if (rc != SQLITE_DONE) return SqlError(db_, "list tokens");
  return out;
}

absl::Status SqliteStore::RevokeToken(const std::string& tenant, const std::string& id, TimeMs when) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "UPDATE tokens SET revoked_ms=COALESCE(revoked_ms, ?3) WHERE id=?1 AND tenant=?2");
  RETURN_IF_ERROR(s.Prepared());
  s.Bind(1, id);
  s.Bind(2, tenant);
  s.Bind(3, int64_t{when});
  RETURN_IF_ERROR(s.Run());
  if (sqlite3_changes(db_) == 0) {
    return absl::NotFoundError(absl::StrCat("tenant '", tenant, "' has no token '", id, "'"));
  }
  return absl::OkStatus();
}

}  // namespace weft
