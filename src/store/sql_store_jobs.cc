// The store's jobs: their records, the state machine's compare-and-set, and the history entry
// (with its webhook deliveries) each transition appends in its own transaction.
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "store/job_columns.h"
#include "store/sql_store.h"

namespace weft::sql_store {
namespace {

using store_columns::kJobColumns;

JobRecord ReadJob(const sql::Row& row) {
  JobRecord r;
  r.id = row.Text(0);
  r.tenant = row.Text(1);
  r.name = row.Text(2);
  r.state = ParseJobState(row.Text(3)).value_or(JobState::kFailed);
  r.reason = row.Text(4);
  r.manifest = row.Text(5);
  r.spec_json = row.Text(6);
  r.created_ms = row.Int(7);
  r.updated_ms = row.Int(8);
  r.attempt = row.Int(9);
  r.progress = {static_cast<int>(row.Int(12)), static_cast<int>(row.Int(13)), row.Int(14),
                row.Int(15), row.Int(16)};
  r.best_test_accuracy = row.OptReal(17);
  r.deliver_met_ms = row.OptInt(18);
  r.complete_met_ms = row.OptInt(19);
  r.restarts = static_cast<int>(row.Int(20));
  r.learners = store_columns::ParseLearners(row.Text(21), row.Text(10), row.Int(11));
  r.servers = store_columns::ParseServers(row.Text(21));
  r.generation = row.Int(22);
  r.next_learner_id = static_cast<int>(row.Int(23));
  r.experiment = row.Text(24);
  r.trial = static_cast<int>(row.Int(25));
  r.gpu_ms = row.Int(26);
  r.learner_ms = row.Int(27);
  return r;
}

// `record` with the experiment link of `stored`: set at creation, never written again.
JobRecord WithLink(const JobRecord& record, const JobRecord& stored) {
  JobRecord r = record;
  r.experiment = stored.experiment;
  r.trial = stored.trial;
  return r;
}

std::string NoJob(const std::string& id) { return absl::StrCat("no job ", id); }

absl::Status WriteJobIn(sql::Tx& tx, const JobRecord& r, bool insert) {
  const char* sql =
      insert ? "INSERT INTO jobs (id, tenant, name, state, reason, manifest, spec_json, "
               "created_ms, updated_ms, attempt, node, learner_pid, epoch, epochs_total, step, "
               "steps_total, samples, best_test_accuracy, deliver_met_ms, complete_met_ms, "
               "restarts, learners, generation, next_learner_id, experiment, trial, gpu_ms, "
               "learner_ms) "
               "VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19,$20,"
               "$21,$22,$23,$24,$25,$26,$27,$28)"
             : "UPDATE jobs SET tenant=$2, name=$3, state=$4, reason=$5, manifest=$6, "
               "spec_json=$7, created_ms=$8, updated_ms=$9, attempt=$10, node=$11, "
               "learner_pid=$12, epoch=$13, epochs_total=$14, step=$15, steps_total=$16, "
               "samples=$17, best_test_accuracy=$18, deliver_met_ms=$19, complete_met_ms=$20, "
               "restarts=$21, learners=$22, generation=$23, "
               "next_learner_id=$24, experiment=$25, trial=$26, gpu_ms=$27, learner_ms=$28 "
               "WHERE id=$1";
  const bool placed = !r.learners.empty();
  absl::StatusOr<int64_t> n = tx.Execute(
      "write job", sql, r.id, r.tenant, r.name, std::string(JobStateName(r.state)), r.reason,
      r.manifest, r.spec_json, r.created_ms, r.updated_ms, r.attempt,
      placed ? r.learners[0].node : std::string(), placed ? r.learners[0].pid : int64_t{0},
      r.progress.epoch, r.progress.epochs_total, r.progress.step, r.progress.steps_total,
      r.progress.samples, r.best_test_accuracy, r.deliver_met_ms, r.complete_met_ms, r.restarts,
      store_columns::LearnersJson(r.learners, r.servers), r.generation, r.next_learner_id,
      r.experiment, r.trial, r.gpu_ms, r.learner_ms);
  if (absl::IsAlreadyExists(n.status())) {
    return absl::AlreadyExistsError(absl::StrCat("job ", r.id, " already exists"));
  }
  return n.status();
}

// Appends the job's next history entry and, to the outbox, one delivery per webhook of the
// job's tenant that asked for the state entered.
absl::Status AppendEventIn(sql::Tx& tx, const std::string& id, TimeMs t,
                           std::optional<JobState> from, JobState to, const std::string& reason) {
  std::optional<std::string> from_name;
  if (from) from_name = JobStateName(*from);
  const std::string to_name(JobStateName(to));
  const sql::Dialect& d = tx.dialect();
  RETURN_IF_ERROR(
      tx.Execute(
            "append history",
            absl::StrCat("INSERT INTO job_events (job_id, seq, time_ms, from_state, to_state, "
                         "reason",
                         d.event_epoch_column,
                         ") SELECT CAST($1 AS TEXT), COALESCE(MAX(seq), 0) + 1, "
                         "CAST($2 AS BIGINT), CAST($3 AS TEXT), CAST($4 AS TEXT), "
                         "CAST($5 AS TEXT)",
                         d.event_epoch_value, " FROM job_events WHERE job_id = CAST($1 AS TEXT)"),
            id, t, from_name, to_name, reason)
          .status());
  return tx
      .Execute(
          "queue webhook deliveries",
          absl::StrCat("INSERT INTO webhook_deliveries (webhook_id, job_id, tenant, event, "
                       "from_state, reason, time_ms, next_attempt_ms) "
                       "SELECT w.id, CAST($1 AS TEXT), w.tenant, CAST($4 AS TEXT), "
                       "CAST($3 AS TEXT), CAST($5 AS TEXT), CAST($2 AS BIGINT), "
                       "CAST($2 AS BIGINT) FROM webhooks w JOIN jobs j ON j.tenant = w.tenant "
                       "WHERE j.id = CAST($1 AS TEXT) AND ",
                       d.position, "(',' || w.events || ',', ',' || CAST($4 AS TEXT) || ',') > 0"),
          id, t, from_name, to_name, reason)
      .status();
}

}  // namespace

absl::StatusOr<JobRecord> GetJobIn(sql::Tx& tx, const std::string& id, bool for_update) {
  return tx.QueryOne<JobRecord>("read job", NoJob(id),
                                absl::StrCat("SELECT ", kJobColumns, " FROM jobs WHERE id=$1",
                                             for_update ? tx.dialect().for_update : ""),
                                ReadJob, id);
}

absl::Status CreateJobIn(sql::Tx& tx, const JobRecord& record, const std::string& reason) {
  RETURN_IF_ERROR(WriteJobIn(tx, record, /*insert=*/true));
  return AppendEventIn(tx, record.id, record.created_ms, std::nullopt, record.state, reason);
}

absl::StatusOr<std::vector<JobRecord>> ListJobsIn(sql::Tx& tx, const std::string& where,
                                                  const std::string& value) {
  return tx.Query<JobRecord>("list jobs",
                             absl::StrCat("SELECT ", kJobColumns, " FROM jobs WHERE ", where),
                             ReadJob, value);
}

absl::Status Jobs::CreateJob(const JobRecord& record, const std::string& reason) {
  return db_->Run("create job", sql::Mode::kWrite,
                  [&](sql::Tx& tx) { return CreateJobIn(tx, record, reason); });
}

absl::StatusOr<JobRecord> Jobs::GetJob(const std::string& id) {
  return db_->Run("read job", sql::Mode::kRead, [&](sql::Tx& tx) { return GetJobIn(tx, id); });
}

absl::StatusOr<std::vector<JobRecord>> Jobs::ListJobs(const std::string& tenant,
                                                      const JobPage& page) {
  // One statement for every case (it is prepared once).
  static const std::string* const kSql = new std::string(absl::StrCat(
      "SELECT ", kJobColumns, " FROM jobs WHERE (CAST($1 AS TEXT) = '' OR tenant = ",
      "CAST($1 AS TEXT)) AND (CAST($2 AS TEXT) = '' OR (created_ms, id) > (SELECT created_ms, "
      "id FROM jobs WHERE id = CAST($2 AS TEXT))) ORDER BY created_ms, id LIMIT CAST($3 AS "
      "BIGINT)"));
  const int64_t limit = page.limit > 0 ? page.limit : std::numeric_limits<int64_t>::max();
  return db_->Run(
      "list jobs", sql::Mode::kRead, [&](sql::Tx& tx) -> absl::StatusOr<std::vector<JobRecord>> {
        return tx.Query<JobRecord>("list jobs", *kSql, ReadJob, tenant, page.after, limit);
      });
}

absl::StatusOr<std::vector<JobRecord>> Jobs::ListActiveJobs() {
  // The states that are not settled, from the one predicate that defines them; built once.
  static const std::string* const kSql = [] {
    return new std::string(absl::StrCat("SELECT ", kJobColumns, " FROM jobs WHERE state IN (",
                                        store_columns::ActiveStatesList(),
                                        ") ORDER BY created_ms, id"));
  }();
  return db_->Run("list active jobs", sql::Mode::kRead,
                  [&](sql::Tx& tx) -> absl::StatusOr<std::vector<JobRecord>> {
                    return tx.Query<JobRecord>("list active jobs", *kSql, ReadJob);
                  });
}

absl::StatusOr<JobStore::JobCounts> Jobs::CountJobs(const std::string& tenant) {
  static const std::string* const kSql = [] {
    return new std::string(absl::StrCat("SELECT COUNT(*), COALESCE(SUM(CASE WHEN state IN (",
                                        store_columns::ActiveStatesList(),
                                        ") THEN 1 ELSE 0 END), 0), COALESCE(SUM(gpu_ms), 0) "
                                        "FROM jobs WHERE tenant=$1"));
  }();
  return db_->Run("count jobs", sql::Mode::kRead, [&](sql::Tx& tx) -> absl::StatusOr<JobCounts> {
    ASSIGN_OR_RETURN(std::vector<JobCounts> counts,
                     tx.Query<JobCounts>(
                         "count jobs", *kSql,
                         [](const sql::Row& row) {
                           return JobCounts{row.Int(0), row.Int(1), row.Int(2)};
                         },
                         tenant));
    return counts.empty() ? JobCounts{} : counts[0];
  });
}

absl::Status Jobs::TransitionJob(const JobRecord& record, JobState expected_from) {
  return db_->Run("transition job", sql::Mode::kWrite, [&](sql::Tx& tx) -> absl::Status {
    // Locked: another writer's transition of this job waits until this one commits.
    ASSIGN_OR_RETURN(JobRecord current, GetJobIn(tx, record.id, /*for_update=*/true));
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
    RETURN_IF_ERROR(WriteJobIn(tx, WithLink(record, current), /*insert=*/false));
    return AppendEventIn(tx, record.id, record.updated_ms, expected_from, record.state,
                         record.reason);
  });
}

absl::Status Jobs::UpdateJob(const JobRecord& record) {
  return db_->Run("update job", sql::Mode::kWrite, [&](sql::Tx& tx) -> absl::Status {
    ASSIGN_OR_RETURN(JobRecord current, GetJobIn(tx, record.id, /*for_update=*/true));
    JobRecord merged = WithLink(record, current);
    merged.state = current.state;
    merged.reason = current.reason;
    merged.updated_ms = current.updated_ms;
    return WriteJobIn(tx, merged, /*insert=*/false);
  });
}

absl::Status Jobs::DeleteJob(const std::string& id) {
  // What belongs to the job goes with it (ON DELETE CASCADE); the GPU time it held stays its
  // tenant's.
  return db_->Run("delete job", sql::Mode::kWrite, [&](sql::Tx& tx) -> absl::Status {
    RETURN_IF_ERROR(tx.Execute("keep the job's GPU time",
                               "UPDATE tenants SET deleted_jobs_gpu_ms = deleted_jobs_gpu_ms + "
                               "(SELECT gpu_ms FROM jobs WHERE id=$1) WHERE name = "
                               "(SELECT tenant FROM jobs WHERE id=$1)",
                               id)
                        .status());
    ASSIGN_OR_RETURN(int64_t n, tx.Execute("delete job", "DELETE FROM jobs WHERE id=$1", id));
    if (n == 0) return absl::NotFoundError(NoJob(id));
    return absl::OkStatus();
  });
}

}  // namespace weft::sql_store
