// The experiments' rounds: results in, targets, promotions resumed, new trials submitted.
#include "control/experiment_controller.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/ids.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace weft {
namespace {

// How many of a trial's latest metric points are searched for its last evaluation: the
// evaluation at the end of a rung is followed by a few points at most (the final model's).
constexpr int64_t kMetricPointsRead = 64;

bool HasResult(const scheduler::AshaState& state, int64_t trial, int rung) {
  if (rung >= static_cast<int>(state.results.size())) return false;
  for (const scheduler::AshaResult& r : state.results[rung]) {
    if (r.trial == trial) return true;
  }
  return false;
}

// The job of trial `trial` among `trials`; nullptr if it has none (it could not be a job).
const JobRecord* TrialJob(const std::vector<JobRecord>& trials, int64_t trial) {
  for (const JobRecord& job : trials) {
    if (job.trial == trial) return &job;
  }
  return nullptr;
}

std::string Describe(const Hyperparameters& values) {
  return absl::StrJoin(values, ", ", [](std::string* out, const auto& v) {
    absl::StrAppend(out, v.first, "=", v.second);
  });
}

}  // namespace

std::optional<double> TrialMetric(const std::vector<MetricRecord>& metrics,
                                  const std::string& metric) {
  for (auto it = metrics.rbegin(); it != metrics.rend(); ++it) {
    const std::optional<double>& v = metric == "test_loss" ? it->test_loss : it->test_accuracy;
    if (v) return v;
  }
  return std::nullopt;
}

absl::StatusOr<ExperimentRecord> ExperimentController::Submit(const std::string& manifest,
                                                              const std::string& tenant,
                                                              std::vector<FieldError>* errors) {
  ASSIGN_OR_RETURN(ExperimentSpec spec, ParseExperiment(manifest, errors));
  ExperimentRecord e;
  e.id = NewExperimentId(clock_.NowMs());
  e.tenant = tenant;
  e.name = spec.name;
  e.reason = "submitted";
  e.manifest = manifest;
  {
    ASSIGN_OR_RETURN(ExperimentSearch search, ExperimentSearch::Restore(spec, ""));
    e.search_state = search.StateJson();
  }
  e.created_ms = e.updated_ms = clock_.NowMs();
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckLimits(tenant, /*new_one=*/true));
  RETURN_IF_ERROR(store_.CreateExperiment(e));
  e.revision = 1;
  Published(e);
  specs_[e.id] = std::make_unique<const ExperimentSpec>(std::move(spec));
  spdlog::info("experiment {} ({}) submitted by tenant {}", e.id, e.name, tenant);
  WakeRounds();  // its first trials are submitted now
  return e;
}

void ExperimentController::Round() {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::vector<ExperimentRecord>> active = store_.ListActiveExperiments();
  if (!active.ok()) {
    spdlog::warn("experiments: cannot list them: {}", active.status().message());
    return;
  }
  for (ExperimentRecord& e : *active) {
    if (absl::Status s = Drive(e); !s.ok()) {
      spdlog::warn("experiment {}: {} (the next round goes on)", e.id, s.message());
    }
    if (e.state != ExperimentState::kRunning) specs_.erase(e.id);  // no round drives it again
  }
}

void ExperimentController::StartRounds(int64_t period_ms) {
  rounds_ = std::make_unique<ControlLoop>([this] { Round(); }, period_ms);
  trial_ends_ =
      std::make_unique<EventWaker>(jobs_.events(), MayMoveASearch, [this] { rounds_->Wake(); });
  rounds_->Start();
  trial_ends_->Start();
}

void ExperimentController::StopRounds() {
  if (trial_ends_) trial_ends_->Stop();
  if (rounds_) rounds_->Stop();
  trial_ends_.reset();
  rounds_.reset();
}

bool ExperimentController::MayMoveASearch(const JobEvent& event) {
  if (event.type == JobEventType::kDeleted) return true;
  if (event.type != JobEventType::kState) return false;
  switch (event.to) {
    case JobState::kHalted:
    case JobState::kCompleted:
    case JobState::kFailed:
    case JobState::kDelivered:
      return true;
    default:
      return false;
  }
}

void ExperimentController::WakeRounds() {
  if (rounds_) rounds_->Wake();
}

absl::Status ExperimentController::CheckLimits(const std::string& tenant, bool new_one) {
  ASSIGN_OR_RETURN(Store::ExperimentCounts counts, store_.CountExperiments(tenant));
  const int64_t max_total = limits_.tenant_max_experiments;
  const int64_t max_running = limits_.tenant_max_running_experiments;
  if (new_one && max_total > 0 && counts.total >= max_total) {
    return absl::FailedPreconditionError(absl::StrCat(
        "tenant '", tenant, "' has ", counts.total, " experiments, as many as weftd keeps for a ",
        "tenant (--tenant-max-experiments); delete ended ones with weft experiment delete ID"));
  }
  if (max_running > 0 && counts.running >= max_running) {
    return absl::FailedPreconditionError(absl::StrCat(
        "tenant '", tenant, "' has ", counts.running, " experiments running, as many as weftd ",
        "runs for a tenant at once (--tenant-max-running-experiments); halt one or wait for one ",
        "to end"));
  }
  return absl::OkStatus();
}

absl::Status ExperimentController::Save(ExperimentRecord& e) {
  RETURN_IF_ERROR(store_.UpdateExperiment(e));
  Published(e);
  return absl::OkStatus();
}

void ExperimentController::Published(const ExperimentRecord& e, bool deleted) {
  JobEvent event;
  event.type = deleted ? JobEventType::kExperimentDeleted : JobEventType::kExperiment;
  event.tenant = e.tenant;
  event.time_ms = clock_.NowMs();
  event.experiment = e;
  jobs_.events().Publish(std::move(event));
}

absl::StatusOr<const ExperimentSpec*> ExperimentController::SpecOf(const ExperimentRecord& e) {
  if (auto it = specs_.find(e.id); it != specs_.end()) return it->second.get();
  ASSIGN_OR_RETURN(ExperimentSpec spec, ParseExperiment(e.manifest));
  auto& slot = specs_[e.id];
  slot = std::make_unique<const ExperimentSpec>(std::move(spec));
  return slot.get();
}

absl::Status ExperimentController::Drive(ExperimentRecord& e) {
  ASSIGN_OR_RETURN(std::vector<JobRecord> trials, store_.ListTrials(e.id));
  absl::StatusOr<const ExperimentSpec*> spec = SpecOf(e);
  if (!spec.ok()) {
    return End(e, ExperimentState::kFailed,
               absl::StrCat("its manifest no longer parses: ", spec.status().message()), trials);
  }
  absl::StatusOr<ExperimentSearch> search = ExperimentSearch::Restore(**spec, e.search_state);
  if (!search.ok()) {
    return End(e, ExperimentState::kFailed,
               absl::StrCat("its search cannot go on: ", search.status().message()), trials);
  }
  ASSIGN_OR_RETURN(const bool reported, ReportResults(e, **spec, *search, trials));
  if (reported) {
    e.search_state = search->StateJson();
    e.updated_ms = clock_.NowMs();
  }
  if (e.complete_met_ms) {
    std::string who;
    for (const JobRecord& job : trials) {
      if (job.complete_met_ms && who.empty())
        who = absl::StrCat("trial ", job.trial, " (", job.id, ")");
    }
    return End(
        e, ExperimentState::kCompleted,
        absl::StrCat(who, " met the complete target (test_accuracy >= ", (*spec)->complete, ")"),
        trials);
  }
  if (reported) RETURN_IF_ERROR(Save(e));
  ResumePromoted(**spec, *search, trials);
  return Plan(e, **spec, *search, trials);
}

absl::StatusOr<bool> ExperimentController::ReportResults(ExperimentRecord& e,
                                                         const ExperimentSpec& spec,
                                                         ExperimentSearch& search,
                                                         const std::vector<JobRecord>& trials) {
  bool changed = false;
  for (const JobRecord& job : trials) {
    const scheduler::AshaState& state = search.asha().state();
    if (job.trial < 0 || job.trial >= state.trials_started) continue;  // not of this search
    if (job.deliver_met_ms && e.delivered_job.empty()) {
      e.delivered_job = job.id;
      e.deliver_met_ms = job.deliver_met_ms;
      changed = true;
    }
    const int rung = state.trial_rung[job.trial];
    if (HasResult(state, job.trial, rung)) continue;
    // A trial's rung is over when its job failed, completed (its budget, or the complete target
    // before it), or waits at the end of the rung's budget; a job halted before (by a person, by
    // the disk quota) is neither: it goes on when resumed.
    const int64_t budget = search.asha().rung_resources()[rung];
    const bool failed = job.state == JobState::kFailed;
    if (!failed && job.state != JobState::kCompleted &&
        !(job.state == JobState::kHalted && job.progress.epoch >= budget)) {
      continue;
    }
    std::optional<double> metric;
    if (!failed) {
      ASSIGN_OR_RETURN(Store::JobSnapshot snapshot,
                       store_.GetJobSnapshot(job.id, kMetricPointsRead));
      metric = TrialMetric(snapshot.metrics, spec.metric);
      // Without an evaluation point among them, the final model's accuracy (its card's).
      for (const ModelRecord& model : snapshot.models) {
        if (!metric && spec.maximize() && model.kind == kFinalModel) metric = model.test_accuracy;
      }
    }
    RETURN_IF_ERROR(search.Report(job.trial, rung, metric));
    changed = true;
    spdlog::info("experiment {}: trial {} ({}) ended rung {} ({} epochs) with {} {}", e.id,
                 job.trial, job.id, rung, budget, spec.metric,
                 metric ? absl::StrCat(*metric) : std::string("none (failed)"));
    if (job.complete_met_ms && !e.complete_met_ms) e.complete_met_ms = job.complete_met_ms;
  }
  // A trial whose job is gone (deleted by a person) and whose rung has no result fails: the
  // search does not wait for it.
  for (int64_t trial = 0; trial < search.asha().state().trials_started; ++trial) {
    const int rung = search.asha().state().trial_rung[trial];
    if (TrialJob(trials, trial) != nullptr || HasResult(search.asha().state(), trial, rung)) {
      continue;
    }
    RETURN_IF_ERROR(search.Report(trial, rung, std::nullopt));
    changed = true;
    spdlog::info("experiment {}: trial {} has no job any more: a failed trial", e.id, trial);
  }
  int best_rung = 0;
  if (std::optional<scheduler::AshaResult> best = search.asha().Best(&best_rung)) {
    const JobRecord* job = TrialJob(trials, best->trial);
    if (job != nullptr && (e.best_job != job->id || e.best_metric != best->metric)) {
      e.best_job = job->id;
      e.best_metric = best->metric;
      changed = true;
    }
  }
  return changed;
}

void ExperimentController::ResumePromoted(const ExperimentSpec& spec,
                                          const ExperimentSearch& search,
                                          const std::vector<JobRecord>& trials) {
  const scheduler::AshaState& state = search.asha().state();
  for (const JobRecord& job : trials) {
    if (job.state != JobState::kHalted || job.trial < 0 || job.trial >= state.trials_started) {
      continue;
    }
    const int rung = state.trial_rung[job.trial];
    const int64_t budget = search.asha().rung_resources()[rung];
    // Promoted into `rung`, its job still has the previous rung's budget.
    if (HasResult(state, job.trial, rung) || job.progress.epochs_total >= budget) continue;
    absl::Status s = jobs_.Resume(
        job.id, Controller::Budget{static_cast<int>(budget), budget < spec.max_resource});
    if (!s.ok())
      spdlog::warn("trial {}: cannot resume it into rung {}: {}", job.id, rung, s.message());
  }
}

absl::Status ExperimentController::Plan(ExperimentRecord& e, const ExperimentSpec& spec,
                                        ExperimentSearch& search,
                                        const std::vector<JobRecord>& trials) {
  while (search.asha().Running() < spec.max_concurrent_trials) {
    TrialPlan plan = search.Next();
    if (plan.kind == scheduler::AshaDecision::kWait) return absl::OkStatus();
    e.search_state = search.StateJson();
    e.updated_ms = clock_.NowMs();
    if (plan.kind == scheduler::AshaDecision::kDone) {
      const int64_t started = search.asha().state().trials_started;
      return End(e, ExperimentState::kCompleted,
                 absl::StrCat("the search is done: ", started, started == 1 ? " trial" : " trials",
                              e.best_metric ? absl::StrCat(", the best ", e.best_job, " with ",
                                                           spec.metric, " ", *e.best_metric)
                                            : std::string(", none with a result")),
                 {});
    }
    if (plan.kind == scheduler::AshaDecision::kPromote) {
      // Stored first: the round that finds the job not yet resumed resumes it (ResumePromoted).
      RETURN_IF_ERROR(Save(e));
      const JobRecord* job = TrialJob(trials, plan.trial);
      if (job == nullptr) continue;
      spdlog::info("experiment {}: trial {} promoted to rung {} ({} epochs)", e.id, plan.trial,
                   plan.rung, plan.epochs);
      absl::Status s = jobs_.Resume(job->id, Controller::Budget{static_cast<int>(plan.epochs),
                                                                plan.epochs < spec.max_resource});
      if (!s.ok()) spdlog::warn("trial {}: cannot resume it: {}", job->id, s.message());
      continue;
    }
    absl::StatusOr<std::string> manifest =
        TrialJobManifest(spec, plan.trial, plan.values, plan.epochs);
    Controller::TrialOf trial{&e, static_cast<int>(plan.trial),
                              absl::StrCat("trial ", plan.trial, " of experiment ", e.id, " (",
                                           Describe(plan.values), ")")};
    std::vector<FieldError> errors;
    absl::StatusOr<JobRecord> job = manifest.ok()
                                        ? jobs_.Submit(*manifest, e.tenant, &errors, &trial)
                                        : absl::StatusOr<JobRecord>(manifest.status());
    if (job.ok()) {
      Published(e);  // stored with its new trial (Store::StartTrial)
      continue;
    }
    if (!absl::IsInvalidArgument(job.status())) {
      // A job limit, the disk quota, the executor, or another writer of the experiment: the next
      // round plans again from the stored state.
      spdlog::info("experiment {}: trial {} waits: {}", e.id, plan.trial, job.status().message());
      return absl::OkStatus();
    }
    // Values that cannot be a job (the cluster changed since submission, say): a failed trial.
    spdlog::warn("experiment {}: trial {} cannot be a job: {}", e.id, plan.trial,
                 job.status().message());
    RETURN_IF_ERROR(search.Report(plan.trial, 0, std::nullopt));
    e.search_state = search.StateJson();
    RETURN_IF_ERROR(Save(e));
  }
  return absl::OkStatus();
}

absl::Status ExperimentController::End(ExperimentRecord& e, ExperimentState state,
                                       const std::string& reason,
                                       const std::vector<JobRecord>& trials) {
  // Its trials first: a round cut short here ends the experiment again.
  std::string preempted;
  for (const JobRecord& job : trials) {
    if (IsSettled(job.state)) continue;
    if (job.state == JobState::kPreempted || job.state == JobState::kResuming) {
      preempted = job.id;  // Controller::Halt refuses it until it is QUEUED
      continue;
    }
    absl::Status s =
        jobs_.Halt(job.id, absl::StrCat("halted: its experiment ", e.id, " ended (", reason, ")"));
    if (!s.ok()) spdlog::warn("trial {}: cannot halt it: {}", job.id, s.message());
  }
  if (!preempted.empty()) {
    return absl::UnavailableError(absl::StrCat(
        "trial ", preempted, " is being preempted; experiment ", e.id, " becomes ",
        ExperimentStateName(state), " once it is QUEUED again (retry in a few seconds)"));
  }
  e.state = state;
  e.reason = reason;
  e.updated_ms = clock_.NowMs();
  RETURN_IF_ERROR(Save(e));
  spdlog::info("experiment {} {}: {}", e.id, ExperimentStateName(state), reason);
  return absl::OkStatus();
}

}  // namespace weft
