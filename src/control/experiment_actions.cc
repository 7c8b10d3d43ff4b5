// A person's actions on an experiment: halt, resume, delete (ExperimentController's public
// contract in experiment_controller.h). They take the rounds' lock, so that no round drives an
// experiment while it changes hands; the rounds themselves are in experiment_controller.cc.
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "control/experiment_controller.h"

namespace weft {

absl::Status ExperimentController::Halt(const std::string& id) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(ExperimentRecord e, store_.GetExperiment(id));
  if (e.state != ExperimentState::kRunning) {
    return absl::FailedPreconditionError(absl::StrCat("experiment ", id, " is ",
                                                      ExperimentStateName(e.state),
                                                      "; only RUNNING experiments halt"));
  }
  ASSIGN_OR_RETURN(std::vector<JobRecord> trials, store_.ListTrials(id));
  return End(e, ExperimentState::kHalted, "halted by user", trials);
}

absl::Status ExperimentController::Resume(const std::string& id) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(ExperimentRecord e, store_.GetExperiment(id));
  if (e.state != ExperimentState::kHalted) {
    return absl::FailedPreconditionError(absl::StrCat("experiment ", id, " is ",
                                                      ExperimentStateName(e.state),
                                                      "; only HALTED experiments resume"));
  }
  RETURN_IF_ERROR(CheckLimits(e.tenant, /*new_one=*/false));
  // The trials first: cut short before the experiment is stored RUNNING, a second Resume
  // resumes the rest.
  ASSIGN_OR_RETURN(std::vector<JobRecord> trials, store_.ListTrials(id));
  for (const JobRecord& job : trials) {
    if (job.state != JobState::kHalted || job.progress.epoch >= job.progress.epochs_total) {
      continue;  // training, settled, or waiting at the end of its rung
    }
    RETURN_IF_ERROR(jobs_.Resume(job.id, std::nullopt));
  }
  e.state = ExperimentState::kRunning;
  e.reason = "resumed by user";
  e.updated_ms = clock_.NowMs();
  RETURN_IF_ERROR(Save(e));
  spdlog::info("experiment {} RUNNING: resumed by user", id);
  WakeRounds();
  return absl::OkStatus();
}

absl::Status ExperimentController::Delete(const std::string& id) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(ExperimentRecord e, store_.GetExperiment(id));
  ASSIGN_OR_RETURN(std::vector<JobRecord> trials, store_.ListTrials(id));
  // Halted first, so that no round starts a trial while its others go.
  if (e.state == ExperimentState::kRunning) {
    RETURN_IF_ERROR(End(e, ExperimentState::kHalted, "deleted by user", trials));
  }
  for (const JobRecord& job : trials) RETURN_IF_ERROR(jobs_.Delete(job.id));
  RETURN_IF_ERROR(store_.DeleteExperiment(id));
  Published(e, /*deleted=*/true);
  specs_.erase(id);
  spdlog::info("experiment {} deleted with its {} trial(s)", id, trials.size());
  return absl::OkStatus();
}

}  // namespace weft
