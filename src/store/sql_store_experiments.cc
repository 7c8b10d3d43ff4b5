// The store's experiments: their records, written over the revision they were read at, and the
// trials' jobs, each created in the same transaction as the search state that names it.
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "store/sql_store.h"

namespace weft::sql_store {
namespace {

constexpr char kColumns[] =
    "id, tenant, name, state, reason, manifest, search_state, revision, best_job, best_metric, "
    "delivered_job, deliver_met_ms, complete_met_ms, created_ms, updated_ms";

ExperimentRecord ReadExperiment(const sql::Row& row) {
  ExperimentRecord e;
  e.id = row.Text(0);
  e.tenant = row.Text(1);
  e.name = row.Text(2);
  e.state = ParseExperimentState(row.Text(3)).value_or(ExperimentState::kFailed);
  e.reason = row.Text(4);
  e.manifest = row.Text(5);
  e.search_state = row.Text(6);
  e.revision = row.Int(7);
  e.best_job = row.Text(8);
  e.best_metric = row.OptReal(9);
  e.delivered_job = row.Text(10);
  e.deliver_met_ms = row.OptInt(11);
  e.complete_met_ms = row.OptInt(12);
  e.created_ms = row.Int(13);
  e.updated_ms = row.Int(14);
  return e;
}

std::string NoExperiment(const std::string& id) { return absl::StrCat("no experiment ", id); }

absl::StatusOr<ExperimentRecord> GetExperimentIn(sql::Tx& tx, const std::string& id) {
  return tx.QueryOne<ExperimentRecord>(
      "read experiment", NoExperiment(id),
      absl::StrCat("SELECT ", kColumns, " FROM experiments WHERE id=$1"), ReadExperiment, id);
}

// UpdateExperiment inside `tx`: the compare-and-set on the revision.
absl::Status UpdateExperimentIn(sql::Tx& tx, const ExperimentRecord& e) {
  ASSIGN_OR_RETURN(
      int64_t n,
      tx.Execute("update experiment",
                 "UPDATE experiments SET state=$2, reason=$3, search_state=$4, "
                 "revision=$5, best_job=$6, best_metric=$7, delivered_job=$8, "
                 "deliver_met_ms=$9, complete_met_ms=$10, updated_ms=$11 "
                 "WHERE id=$1 AND revision=$12",
                 e.id, std::string(ExperimentStateName(e.state)), e.reason, e.search_state,
                 e.revision + 1, e.best_job, e.best_metric, e.delivered_job, e.deliver_met_ms,
                 e.complete_met_ms, e.updated_ms, e.revision));
  if (n == 1) return absl::OkStatus();
  ASSIGN_OR_RETURN(ExperimentRecord stored, GetExperimentIn(tx, e.id));
  return absl::FailedPreconditionError(absl::StrCat("experiment ", e.id,
                                                    " was written since it was read (revision ",
                                                    stored.revision, ", not ", e.revision, ")"));
}

}  // namespace

absl::Status Experiments::CreateExperiment(const ExperimentRecord& e) {
  return db_->Run("create experiment", sql::Mode::kWrite, [&](sql::Tx& tx) -> absl::Status {
    absl::StatusOr<int64_t> n = tx.Execute(
        "create experiment",
        absl::StrCat("INSERT INTO experiments (", kColumns,
                     ") VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15)"),
        e.id, e.tenant, e.name, std::string(ExperimentStateName(e.state)), e.reason, e.manifest,
        e.search_state, int64_t{1}, e.best_job, e.best_metric, e.delivered_job, e.deliver_met_ms,
        e.complete_met_ms, e.created_ms, e.updated_ms);
    if (absl::IsAlreadyExists(n.status())) {
      return absl::AlreadyExistsError(absl::StrCat("experiment ", e.id, " already exists"));
    }
    return n.status();
  });
}

absl::StatusOr<ExperimentRecord> Experiments::GetExperiment(const std::string& id) {
  return db_->Run("read experiment", sql::Mode::kRead,
                  [&](sql::Tx& tx) { return GetExperimentIn(tx, id); });
}

absl::StatusOr<std::vector<ExperimentRecord>> Experiments::ListExperiments(
    const std::string& tenant) {
  return db_->Run("list experiments", sql::Mode::kRead,
                  [&](sql::Tx& tx) -> absl::StatusOr<std::vector<ExperimentRecord>> {
                    return tx.Query<ExperimentRecord>(
                        "list experiments",
                        absl::StrCat("SELECT ", kColumns,
                                     " FROM experiments WHERE CAST($1 AS TEXT) = '' OR "
                                     "tenant = CAST($1 AS TEXT) ORDER BY created_ms, id"),
                        ReadExperiment, tenant);
                  });
}

absl::StatusOr<std::vector<ExperimentRecord>> Experiments::ListActiveExperiments() {
  return db_->Run("list active experiments", sql::Mode::kRead,
                  [&](sql::Tx& tx) -> absl::StatusOr<std::vector<ExperimentRecord>> {
                    return tx.Query<ExperimentRecord>(
                        "list active experiments",
                        absl::StrCat("SELECT ", kColumns,
                                     " FROM experiments WHERE state = $1 ORDER BY created_ms, id"),
                        ReadExperiment,
                        std::string(ExperimentStateName(ExperimentState::kRunning)));
                  });
}

absl::StatusOr<ExperimentStore::ExperimentCounts> Experiments::CountExperiments(
    const std::string& tenant) {
  return db_->Run(
      "count experiments", sql::Mode::kRead, [&](sql::Tx& tx) -> absl::StatusOr<ExperimentCounts> {
        ASSIGN_OR_RETURN(std::vector<ExperimentCounts> counts,
                         tx.Query<ExperimentCounts>(
                             "count experiments",
                             "SELECT COUNT(*), COALESCE(SUM(CASE WHEN state = $2 THEN 1 ELSE 0 "
                             "END), 0) FROM experiments WHERE tenant = $1",
                             [](const sql::Row& row) {
                               return ExperimentCounts{row.Int(0), row.Int(1)};
                             },
                             tenant, std::string(ExperimentStateName(ExperimentState::kRunning))));
        return counts.empty() ? ExperimentCounts{} : counts[0];
      });
}

absl::Status Experiments::UpdateExperiment(ExperimentRecord& e) {
  RETURN_IF_ERROR(db_->Run("update experiment", sql::Mode::kWrite,
                           [&](sql::Tx& tx) { return UpdateExperimentIn(tx, e); }));
  e.revision += 1;
  return absl::OkStatus();
}

absl::Status Experiments::StartTrial(ExperimentRecord& e, const JobRecord& trial,
                                     const std::string& reason) {
  if (trial.experiment != e.id || trial.trial < 0) {
    return absl::InvalidArgumentError(absl::StrCat("job ", trial.id, " is not a trial of ", e.id));
  }
  RETURN_IF_ERROR(db_->Run("start trial", sql::Mode::kWrite, [&](sql::Tx& tx) -> absl::Status {
    RETURN_IF_ERROR(UpdateExperimentIn(tx, e));
    return CreateJobIn(tx, trial, reason);
  }));
  e.revision += 1;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<JobRecord>> Experiments::ListTrials(const std::string& id) {
  return db_->Run("list trials", sql::Mode::kSnapshot,
                  [&](sql::Tx& tx) -> absl::StatusOr<std::vector<JobRecord>> {
                    RETURN_IF_ERROR(GetExperimentIn(tx, id).status());
                    return ListJobsIn(tx, "experiment = $1 ORDER BY trial, id", id);
                  });
}

absl::Status Experiments::DeleteExperiment(const std::string& id) {
  return db_->Run("delete experiment", sql::Mode::kWrite, [&](sql::Tx& tx) -> absl::Status {
    ASSIGN_OR_RETURN(int64_t trials,
                     tx.Count("count trials", "SELECT COUNT(*) FROM jobs WHERE experiment=$1", id));
    if (trials > 0) {
      return absl::FailedPreconditionError(absl::StrCat("experiment ", id, " still has ", trials,
                                                        trials == 1 ? " trial job" : " trial jobs",
                                                        "; delete them first"));
    }
    ASSIGN_OR_RETURN(int64_t n,
                     tx.Execute("delete experiment", "DELETE FROM experiments WHERE id=$1", id));
    if (n == 0) return absl::NotFoundError(NoExperiment(id));
    return absl::OkStatus();
  });
}

}  // namespace weft::sql_store
