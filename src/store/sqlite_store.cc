// The SQLite store: opening and migrating, and the jobs. Their history, metrics, models and
// checkpoints are in sqlite_store_records.cc, tenants and tokens in sqlite_store_tenants.cc.
#include "store/sqlite_store.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "store/job_columns.h"
#include "store/sqlite_query.h"
#include "store/sqlite_schema.h"

namespace weft {

namespace {

using store_columns::kJobColumns;
using store_columns::LearnersJson;
using store_columns::ParseLearners;

JobRecord ReadJob(sqlite::Stmt& s) {
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
  r.progress = {static_cast<int>(s.Int(12)), static_cast<int>(s.Int(13)), s.Int(14), s.Int(15),
                s.Int(16)};
  r.best_test_accuracy = s.OptReal(17);
  r.deliver_met_ms = s.OptInt(18);
  r.complete_met_ms = s.OptInt(19);
  r.restarts = static_cast<int>(s.Int(20));
  r.learners = ParseLearners(s.Text(21), s.Text(10), s.Int(11));
  r.servers = store_columns::ParseServers(s.Text(21));
  r.generation = s.Int(22);
  r.next_learner_id = static_cast<int>(s.Int(23));
  return r;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::string& path,
                                                               int64_t max_bytes) {
  sqlite3* db = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    absl::Status s = absl::InternalError(
        absl::StrCat("cannot open store ", path, ": ", db ? sqlite3_errmsg(db) : "out of memory"));
    sqlite3_close(db);
    return s;
  }
  sqlite3_busy_timeout(db, 5000);
  std::unique_ptr<SqliteStore> store(new SqliteStore(db));
  RETURN_IF_ERROR(store->Migrate());
  if (max_bytes > 0) RETURN_IF_ERROR(store->LimitSize(max_bytes));
  return store;
}

SqliteStore::SqliteStore(sqlite3* db)
    : db_(db), stmts_(std::make_unique<sqlite::StatementCache>(db)) {}

SqliteStore::~SqliteStore() {
  absl::MutexLock lock(&mu_);
  stmts_->Clear();  // sqlite3_close refuses a connection with statements left
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

absl::Status SqliteStore::LimitSize(int64_t max_bytes) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(std::vector<int64_t> page,
                   sqlite::Query<int64_t>(*stmts_, "read page size", "PRAGMA page_size",
                                          [](sqlite::Stmt& s) { return s.Int(0); }));
  const int64_t pages = std::max<int64_t>(1, max_bytes / std::max<int64_t>(1, page.at(0)));
  return Exec(absl::StrCat("PRAGMA max_page_count=", pages));
}

absl::Status SqliteStore::Migrate() {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(Exec("PRAGMA journal_mode=WAL"));
  RETURN_IF_ERROR(Exec("PRAGMA synchronous=FULL"));
  RETURN_IF_ERROR(Exec("PRAGMA foreign_keys=ON"));
  ASSIGN_OR_RETURN(std::vector<int64_t> v,
                   sqlite::Query<int64_t>(*stmts_, "read schema version", "PRAGMA user_version",
                                          [](sqlite::Stmt& s) { return s.Int(0); }));
  const int64_t version = v.empty() ? 0 : v[0];
  if (version > sqlite::kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat("store schema version ", version,
                                                      " is newer than this weftd understands (",
                                                      sqlite::kSchemaVersion, "); upgrade weftd"));
  }
  if (version == sqlite::kSchemaVersion) return absl::OkStatus();
  sqlite::Transaction tx(db_);
  RETURN_IF_ERROR(tx.Begun());
  for (int64_t i = version; i < sqlite::kSchemaVersion; ++i) {
    RETURN_IF_ERROR(Exec(sqlite::kMigrations[i]));
  }
  RETURN_IF_ERROR(Exec(absl::StrCat("PRAGMA user_version=", sqlite::kSchemaVersion)));
  return tx.Commit();
}

absl::Status SqliteStore::WriteJobLocked(const JobRecord& r, bool insert) {
  const char* sql =
      insert ? "INSERT INTO jobs (id, tenant, name, state, reason, manifest, spec_json, "
               "created_ms, updated_ms, attempt, node, learner_pid, epoch, epochs_total, step, "
               "steps_total, samples, best_test_accuracy, deliver_met_ms, complete_met_ms, "
               "restarts, learners, generation, next_learner_id) VALUES "
               "(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20,?21,?22,?"
               "23,?24)"
             : "UPDATE jobs SET tenant=?2, name=?3, state=?4, reason=?5, manifest=?6, "
               "spec_json=?7, created_ms=?8, updated_ms=?9, attempt=?10, node=?11, "
               "learner_pid=?12, epoch=?13, epochs_total=?14, step=?15, steps_total=?16, "
               "samples=?17, best_test_accuracy=?18, deliver_met_ms=?19, complete_met_ms=?20, "
               "restarts=?21, learners=?22, generation=?23, "
               "next_learner_id=?24 WHERE id=?1";
  const bool placed = !r.learners.empty();
  absl::StatusOr<int> n = sqlite::Execute(
      *stmts_, "write job", sql, r.id, r.tenant, r.name, std::string(JobStateName(r.state)),
      r.reason, r.manifest, r.spec_json, r.created_ms, r.updated_ms, r.attempt,
      placed ? r.learners[0].node : std::string(), placed ? r.learners[0].pid : int64_t{0},
      r.progress.epoch, r.progress.epochs_total, r.progress.step, r.progress.steps_total,
      r.progress.samples, r.best_test_accuracy, r.deliver_met_ms, r.complete_met_ms, r.restarts,
      LearnersJson(r.learners, r.servers), r.generation, r.next_learner_id);
  if (absl::IsAlreadyExists(n.status())) {
    return absl::AlreadyExistsError(absl::StrCat("job ", r.id, " already exists"));
  }
  return n.status();
}

absl::Status SqliteStore::AppendEventLocked(const std::string& id, TimeMs t,
                                            std::optional<JobState> from, JobState to,
                                            const std::string& reason) {
  std::optional<std::string> from_name;
  if (from) from_name = JobStateName(*from);
  RETURN_IF_ERROR(
      sqlite::Execute(*stmts_, "append history",
                      "INSERT INTO job_events (job_id, seq, time_ms, from_state, to_state, reason) "
                      "SELECT ?1, COALESCE(MAX(seq), 0) + 1, ?2, ?3, ?4, ?5 FROM job_events "
                      "WHERE job_id=?1",
                      id, t, from_name, std::string(JobStateName(to)), reason)
          .status());
  // The outbox: one delivery per webhook of the job's tenant that asked for this state.
  return sqlite::Execute(
             *stmts_, "queue webhook deliveries",
             "INSERT INTO webhook_deliveries (webhook_id, job_id, tenant, event, from_state, "
             "reason, time_ms, next_attempt_ms) "
             "SELECT w.id, ?1, w.tenant, ?4, ?3, ?5, ?2, ?2 FROM webhooks w "
             "JOIN jobs j ON j.tenant = w.tenant "
             "WHERE j.id = ?1 AND instr(',' || w.events || ',', ',' || ?4 || ',') > 0",
             id, t, from_name, std::string(JobStateName(to)), reason)
      .status();
}

absl::Status SqliteStore::CreateJob(const JobRecord& record, const std::string& reason) {
  absl::MutexLock lock(&mu_);
  sqlite::Transaction tx(db_);
  RETURN_IF_ERROR(tx.Begun());
  RETURN_IF_ERROR(WriteJobLocked(record, /*insert=*/true));
  RETURN_IF_ERROR(
      AppendEventLocked(record.id, record.created_ms, std::nullopt, record.state, reason));
  return tx.Commit();
}

absl::StatusOr<JobRecord> SqliteStore::GetJobLocked(const std::string& id) {
  return sqlite::QueryOne<JobRecord>(*stmts_, "read job", absl::StrCat("no job ", id),
                                     absl::StrCat("SELECT ", kJobColumns, " FROM jobs WHERE id=?1"),
                                     ReadJob, id);
}

absl::StatusOr<JobRecord> SqliteStore::GetJob(const std::string& id) {
  absl::MutexLock lock(&mu_);
  return GetJobLocked(id);
}

absl::StatusOr<std::vector<JobRecord>> SqliteStore::ListJobs(const std::string& tenant,
                                                             const JobPage& page) {
  absl::MutexLock lock(&mu_);
  // One statement for every case (it is prepared once); LIMIT -1 is no limit.
  static const std::string* const kSql = new std::string(absl::StrCat(
      "SELECT ", kJobColumns, " FROM jobs WHERE (?1 = '' OR tenant = ?1) AND (?2 = '' OR ",
      "(created_ms, id) > (SELECT created_ms, id FROM jobs WHERE id = ?2)) ",
      "ORDER BY created_ms, id LIMIT ?3"));
  return sqlite::Query<JobRecord>(*stmts_, "list jobs", *kSql, ReadJob, tenant, page.after,
                                  page.limit > 0 ? page.limit : int64_t{-1});
}

absl::StatusOr<std::vector<JobRecord>> SqliteStore::ListActiveJobs() {
  // The states that are not settled, from the one predicate that defines them; built once.
  static const std::string* const kSql = [] {
    return new std::string(absl::StrCat("SELECT ", kJobColumns, " FROM jobs WHERE state IN (",
                                        store_columns::ActiveStatesList(),
                                        ") ORDER BY created_ms, id"));
  }();
  absl::MutexLock lock(&mu_);
  return sqlite::Query<JobRecord>(*stmts_, "list active jobs", *kSql, ReadJob);
}

absl::StatusOr<Store::JobCounts> SqliteStore::CountJobs(const std::string& tenant) {
  static const std::string* const kSql = [] {
    return new std::string(absl::StrCat("SELECT COUNT(*), COALESCE(SUM(state IN (",
                                        store_columns::ActiveStatesList(),
                                        ")), 0) FROM jobs WHERE tenant=?1"));
  }();
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(std::vector<JobCounts> counts, sqlite::Query<JobCounts>(
                                                      *stmts_, "count jobs", *kSql,
                                                      [](sqlite::Stmt& s) {
                                                        return JobCounts{s.Int(0), s.Int(1)};
                                                      },
                                                      tenant));
  return counts.empty() ? JobCounts{} : counts[0];
}

absl::Status SqliteStore::TransitionJob(const JobRecord& record, JobState expected_from) {
  absl::MutexLock lock(&mu_);
  sqlite::Transaction tx(db_);
  RETURN_IF_ERROR(tx.Begun());
  ASSIGN_OR_RETURN(JobRecord current, GetJobLocked(record.id));
  if (current.state != expected_from) {
    return absl::FailedPreconditionError(absl::StrCat("job ", record.id, " is ",
                                                      JobStateName(current.state), ", not ",
                                                      JobStateName(expected_from)));
  }
  if (!CanTransition(expected_from, record.state)) {
    return absl::FailedPreconditionError(absl::StrCat("job ", record.id, " cannot go from ",
                                                      JobStateName(expected_from), " to ",
                                                      JobStateName(record.state)));
  }
  RETURN_IF_ERROR(WriteJobLocked(record, /*insert=*/false));
  RETURN_IF_ERROR(
      AppendEventLocked(record.id, record.updated_ms, expected_from, record.state, record.reason));
  return tx.Commit();
}

absl::Status SqliteStore::UpdateJob(const JobRecord& record) {
  absl::MutexLock lock(&mu_);
  sqlite::Transaction tx(db_);
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
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(int n,
                   sqlite::Execute(*stmts_, "delete job", "DELETE FROM jobs WHERE id=?1", id));
  if (n == 0) return absl::NotFoundError(absl::StrCat("no job ", id));
  return absl::OkStatus();
}

}  // namespace weft
