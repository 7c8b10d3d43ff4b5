// The PostgreSQL store: connecting and migrating, and the jobs. Their history, metrics, models
// and checkpoints are in pg_store_records.cc; tenants, tokens, artifacts, data sets and
// webhooks in pg_store_tenants.cc.
#include "store/pg_store.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/status_macros.h"
#include "store/job_columns.h"
#include "store/pg_schema.h"
#include "store/pg_store_run.h"

namespace weft {

namespace pg {

absl::Status Error(const std::string& what) {
  try {
    throw;
  } catch (const pqxx::unique_violation&) {
    return absl::AlreadyExistsError(absl::StrCat(what, ": already exists"));
  } catch (const pqxx::insufficient_resources& e) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the store is full (the PostgreSQL server's disk or memory): ", what, ": ",
                     e.what(), "; nothing of this request was stored"));
  } catch (const pqxx::broken_connection& e) {
    return absl::UnavailableError(
        absl::StrCat("the PostgreSQL store is unreachable: ", what, ": ", e.what()));
  } catch (const pqxx::in_doubt_error& e) {
    return absl::UnavailableError(
        absl::StrCat("the PostgreSQL store lost the connection while ", what,
                     " committed; it may or may not be stored: ", e.what()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("postgresql: ", what, ": ", e.what()));
  }
}

}  // namespace pg

namespace {

using store_columns::kJobColumns;

JobRecord ReadJob(const pqxx::row& row) {
  JobRecord r;
  r.id = pg::Str(row[0]);
  r.tenant = pg::Str(row[1]);
  r.name = pg::Str(row[2]);
  r.state = ParseJobState(pg::Str(row[3])).value_or(JobState::kFailed);
  r.reason = pg::Str(row[4]);
  r.manifest = pg::Str(row[5]);
  r.spec_json = pg::Str(row[6]);
  r.created_ms = row[7].as<int64_t>();
  r.updated_ms = row[8].as<int64_t>();
  r.attempt = row[9].as<int64_t>();
  r.progress = {row[12].as<int>(), row[13].as<int>(), row[14].as<int64_t>(), row[15].as<int64_t>(),
                row[16].as<int64_t>()};
  r.best_test_accuracy = pg::OptReal(row[17]);
  r.deliver_met_ms = pg::OptInt(row[18]);
  r.complete_met_ms = pg::OptInt(row[19]);
  r.restarts = row[20].as<int>();
  r.learners =
      store_columns::ParseLearners(pg::Str(row[21]), pg::Str(row[10]), row[11].as<int64_t>());
  r.servers = store_columns::ParseServers(pg::Str(row[21]));
  r.generation = row[22].as<int64_t>();
  r.next_learner_id = row[23].as<int>();
  return r;
}

std::string NoJob(const std::string& id) { return absl::StrCat("no job ", id); }

}  // namespace

absl::StatusOr<std::unique_ptr<PgStore>> PgStore::Open(const std::string& uri) {
  std::unique_ptr<PgStore> store(new PgStore(uri));
  RETURN_IF_ERROR(store->Migrate());
  return store;
}

PgStore::PgStore(std::string uri) : uri_(std::move(uri)) {}

PgStore::~PgStore() = default;

absl::StatusOr<std::unique_ptr<PgStore::Session>> PgStore::Acquire() {
  {
    absl::MutexLock lock(&mu_);
    while (idle_.empty() && sessions_ >= kMaxSessions) released_.Wait(&mu_);
    if (!idle_.empty()) {
      std::unique_ptr<Session> session = std::move(idle_.back());
      idle_.pop_back();
      return session;
    }
    ++sessions_;  // a new one, connected without holding the lock
  }
  try {
    auto session = std::make_unique<Session>();
    session->conn = std::make_unique<pqxx::connection>(uri_);
    return session;
  } catch (const std::exception& e) {
    {
      absl::MutexLock lock(&mu_);
      --sessions_;
    }
    released_.Signal();
    // libpq's message names the host and the reason, never the password; one line.
    return absl::UnavailableError(
        absl::StrCat("cannot connect to the PostgreSQL store: ",
                     absl::StrReplaceAll(absl::StripTrailingAsciiWhitespace(e.what()),
                                         {{"\n\t", " "}, {"\n", " "}})));
  }
}

void PgStore::Release(std::unique_ptr<Session> session) {
  {
    absl::MutexLock lock(&mu_);
    if (session->conn->is_open()) {
      idle_.push_back(std::move(session));
    } else {
      // The server went away (or restarted): the idle connections went with it.
      sessions_ -= 1 + static_cast<int>(idle_.size());
      idle_.clear();
    }
  }
  released_.SignalAll();
}

std::string PgStore::Describe() {
  absl::StatusOr<std::unique_ptr<Session>> session = Acquire();
  if (!session.ok()) return "postgresql (not connected)";
  pqxx::connection& c = *(*session)->conn;
  auto text = [](const char* s) { return std::string(s != nullptr ? s : ""); };
  std::string out = absl::StrCat(text(c.username()), "@", text(c.hostname()), ":", text(c.port()),
                                 "/", text(c.dbname()));
  Release(*std::move(session));
  return out;
}

absl::Status PgStore::Migrate() {
  return Run("migrate the schema", Mode::kWrite, [](pg::Tx& tx) -> absl::Status {
    // Serialises weftds migrating one database at once; released at commit.
    tx.Exec("SELECT pg_advisory_xact_lock($1)", pg::kMigrationLock);
    tx.Exec("CREATE TABLE IF NOT EXISTS weft_schema (version BIGINT NOT NULL)");
    const int64_t version = tx.Count("SELECT MAX(version) FROM weft_schema");
    if (version > pg::kSchemaVersion) {
      return absl::FailedPreconditionError(absl::StrCat("store schema version ", version,
                                                        " is newer than this weftd understands (",
                                                        pg::kSchemaVersion, "); upgrade weftd"));
    }
    // Migrations are scripts of several statements: run as simple queries, not prepared.
    for (int64_t i = version; i < pg::kSchemaVersion; ++i) tx.Script(pg::kMigrations[i]);
    tx.Exec("DELETE FROM weft_schema");
    tx.Exec("INSERT INTO weft_schema (version) VALUES ($1)", int64_t{pg::kSchemaVersion});
    return absl::OkStatus();
  });
}

absl::StatusOr<JobRecord> PgStore::GetJobIn(pg::Tx& tx, const std::string& id) {
  return tx.QueryOne<JobRecord>(
      NoJob(id), absl::StrCat("SELECT ", kJobColumns, " FROM jobs WHERE id=$1"), ReadJob, id);
}

void PgStore::WriteJobIn(pg::Tx& tx, const JobRecord& r, bool insert) {
  const char* sql =
      insert ? "INSERT INTO jobs (id, tenant, name, state, reason, manifest, spec_json, "
               "created_ms, updated_ms, attempt, node, learner_pid, epoch, epochs_total, step, "
               "steps_total, samples, best_test_accuracy, deliver_met_ms, complete_met_ms, "
               "restarts, learners, generation, next_learner_id) VALUES "
               "($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19,$20,$21,$22,$"
               "23,$24)"
             : "UPDATE jobs SET tenant=$2, name=$3, state=$4, reason=$5, manifest=$6, "
               "spec_json=$7, created_ms=$8, updated_ms=$9, attempt=$10, node=$11, "
               "learner_pid=$12, epoch=$13, epochs_total=$14, step=$15, steps_total=$16, "
               "samples=$17, best_test_accuracy=$18, deliver_met_ms=$19, complete_met_ms=$20, "
               "restarts=$21, learners=$22, generation=$23, "
               "next_learner_id=$24 WHERE id=$1";
  const bool placed = !r.learners.empty();
  tx.Exec(sql, r.id, r.tenant, r.name, std::string(JobStateName(r.state)), r.reason, r.manifest,
          r.spec_json, r.created_ms, r.updated_ms, r.attempt,
          placed ? r.learners[0].node : std::string(), placed ? r.learners[0].pid : int64_t{0},
          r.progress.epoch, r.progress.epochs_total, r.progress.step, r.progress.steps_total,
          r.progress.samples, r.best_test_accuracy, r.deliver_met_ms, r.complete_met_ms, r.restarts,
          store_columns::LearnersJson(r.learners, r.servers), r.generation, r.next_learner_id);
}

void PgStore::AppendEventIn(pg::Tx& tx, const std::string& id, TimeMs t,
                            std::optional<JobState> from, JobState to, const std::string& reason) {
  std::optional<std::string> from_name;
  if (from) from_name = JobStateName(*from);
  const std::string to_name(JobStateName(to));
  tx.Exec(
      "INSERT INTO job_events (job_id, seq, time_ms, from_state, to_state, reason, "
      "leader_epoch) "
      "SELECT $1::text, COALESCE(MAX(seq), 0) + 1, $2::bigint, $3::text, $4::text, $5::text, "
      "(SELECT epoch FROM weft_leader WHERE id = 1) "
      "FROM job_events WHERE job_id=$1::text",
      id, t, from_name, to_name, reason);
  // The outbox: one delivery per webhook of the job's tenant that asked for this state.
  tx.Exec(
      "INSERT INTO webhook_deliveries (webhook_id, job_id, tenant, event, from_state, reason, "
      "time_ms, next_attempt_ms) "
      "SELECT w.id, $1::text, w.tenant, $4::text, $3::text, $5::text, $2::bigint, $2::bigint "
      "FROM webhooks w JOIN jobs j ON j.tenant = w.tenant "
      "WHERE j.id = $1::text AND position(',' || $4::text || ',' in ',' || w.events || ',') > 0",
      id, t, from_name, to_name, reason);
}

absl::Status PgStore::CreateJob(const JobRecord& record, const std::string& reason) {
  absl::Status s = Run("create job", Mode::kWrite, [&](pg::Tx& tx) -> absl::Status {
    WriteJobIn(tx, record, /*insert=*/true);
    AppendEventIn(tx, record.id, record.created_ms, std::nullopt, record.state, reason);
    return absl::OkStatus();
  });
  if (absl::IsAlreadyExists(s)) {
    return absl::AlreadyExistsError(absl::StrCat("job ", record.id, " already exists"));
  }
  return s;
}

absl::StatusOr<JobRecord> PgStore::GetJob(const std::string& id) {
  return Run("read job", Mode::kRead, [&](pg::Tx& tx) { return GetJobIn(tx, id); });
}

absl::StatusOr<std::vector<JobRecord>> PgStore::ListJobs(const std::string& tenant,
                                                         const JobPage& page) {
  static const std::string* const kSql = new std::string(absl::StrCat(
      "SELECT ", kJobColumns, " FROM jobs WHERE ($1::text = '' OR tenant = $1::text) AND ",
      "($2::text = '' OR (created_ms, id) > (SELECT created_ms, id FROM jobs WHERE id = ",
      "$2::text)) ORDER BY created_ms, id LIMIT $3::bigint"));
  // LIMIT NULL is no limit.
  const std::optional<int64_t> limit =
      page.limit > 0 ? std::optional<int64_t>(page.limit) : std::nullopt;
  return Run("list jobs", Mode::kRead, [&](pg::Tx& tx) -> absl::StatusOr<std::vector<JobRecord>> {
    return tx.Query<JobRecord>(*kSql, ReadJob, tenant, page.after, limit);
  });
}

absl::StatusOr<std::vector<JobRecord>> PgStore::ListActiveJobs() {
  static const std::string* const kSql = [] {
    return new std::string(absl::StrCat("SELECT ", kJobColumns, " FROM jobs WHERE state IN (",
                                        store_columns::ActiveStatesList(),
                                        ") ORDER BY created_ms, id"));
  }();
  return Run("list active jobs", Mode::kRead,
             [&](pg::Tx& tx) -> absl::StatusOr<std::vector<JobRecord>> {
               return tx.Query<JobRecord>(*kSql, ReadJob);
             });
}

absl::StatusOr<Store::JobCounts> PgStore::CountJobs(const std::string& tenant) {
  static const std::string* const kSql = [] {
    return new std::string(absl::StrCat("SELECT COUNT(*), COUNT(*) FILTER (WHERE state IN (",
                                        store_columns::ActiveStatesList(),
                                        ")) FROM jobs WHERE tenant=$1"));
  }();
  return Run("count jobs", Mode::kRead, [&](pg::Tx& tx) -> absl::StatusOr<JobCounts> {
    return tx.QueryOne<JobCounts>(
        "no count", *kSql,
        [](const pqxx::row& row) {
          return JobCounts{row[0].as<int64_t>(), row[1].as<int64_t>()};
        },
        tenant);
  });
}

absl::Status PgStore::TransitionJob(const JobRecord& record, JobState expected_from) {
  return Run("transition job", Mode::kWrite, [&](pg::Tx& tx) -> absl::Status {
    // FOR UPDATE: another writer's transition of this job waits until this one commits.
    ASSIGN_OR_RETURN(JobState current,
                     tx.QueryOne<JobState>(
                         NoJob(record.id), "SELECT state FROM jobs WHERE id=$1 FOR UPDATE",
                         [](const pqxx::row& row) {
                           return ParseJobState(pg::Str(row[0])).value_or(JobState::kFailed);
                         },
                         record.id));
    if (current != expected_from) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job ", record.id, " is ", JobStateName(current), ", not ", JobStateName(expected_from)));
    }
    if (!CanTransition(expected_from, record.state)) {
      return absl::FailedPreconditionError(absl::StrCat("job ", record.id, " cannot go from ",
                                                        JobStateName(expected_from), " to ",
                                                        JobStateName(record.state)));
    }
    WriteJobIn(tx, record, /*insert=*/false);
    AppendEventIn(tx, record.id, record.updated_ms, expected_from, record.state, record.reason);
    return absl::OkStatus();
  });
}

absl::Status PgStore::UpdateJob(const JobRecord& record) {
  return Run("update job", Mode::kWrite, [&](pg::Tx& tx) -> absl::Status {
    ASSIGN_OR_RETURN(JobRecord current,
                     tx.QueryOne<JobRecord>(
                         NoJob(record.id),
                         absl::StrCat("SELECT ", kJobColumns, " FROM jobs WHERE id=$1 FOR UPDATE"),
                         ReadJob, record.id));
    JobRecord merged = record;
    merged.state = current.state;
    merged.reason = current.reason;
    merged.updated_ms = current.updated_ms;
    WriteJobIn(tx, merged, /*insert=*/false);
    return absl::OkStatus();
  });
}

absl::Status PgStore::DeleteJob(const std::string& id) {
  return Run("delete job", Mode::kWrite, [&](pg::Tx& tx) -> absl::Status {
    if (tx.Exec("DELETE FROM jobs WHERE id=$1", id).affected_rows() == 0) {
      return absl::NotFoundError(NoJob(id));
    }
    return absl::OkStatus();
  });
}

}  // namespace weft
