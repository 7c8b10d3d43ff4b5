// The experiments as the API reads them (control/experiment_queries.h).
#include "control/experiment_queries.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "control/experiment_search.h"

namespace weft {

absl::StatusOr<ExperimentRecord> ExperimentQueries::Find(const Caller& caller,
                                                         const std::string& id) const {
  absl::StatusOr<ExperimentRecord> e = store_.GetExperiment(id);
  if (e.ok() && !caller.admin && e->tenant != caller.tenant) {
    return absl::NotFoundError(absl::StrCat("no experiment '", id, "'"));
  }
  return e;
}

absl::StatusOr<std::vector<ExperimentRecord>> ExperimentQueries::List(const Caller& caller) const {
  return store_.ListExperiments(caller.admin ? "" : caller.tenant);
}

absl::StatusOr<ExperimentView> ExperimentQueries::Show(const Caller& caller,
                                                       const std::string& id) const {
  ExperimentView view;
  ASSIGN_OR_RETURN(view.record, Find(caller, id));
  absl::StatusOr<ExperimentSpec> spec = ParseExperiment(view.record.manifest);
  if (!spec.ok()) {
    return absl::DataLossError(
        absl::StrCat("experiment ", id, "'s manifest does not parse: ", spec.status().message()));
  }
  view.spec = *std::move(spec);
  ASSIGN_OR_RETURN(ExperimentSearch search,
                   ExperimentSearch::Restore(view.spec, view.record.search_state));
  const scheduler::AshaState& state = search.asha().state();
  const std::vector<int64_t>& resources = search.asha().rung_resources();
  for (size_t k = 0; k < resources.size(); ++k) {
    RungView rung{resources[k], 0, 0};
    if (k < state.results.size()) rung.results = static_cast<int64_t>(state.results[k].size());
    if (k < state.promoted.size()) rung.promoted = static_cast<int64_t>(state.promoted[k].size());
    view.rungs.push_back(rung);
  }
  for (int64_t t = 0; t < state.trials_started; ++t) {
    TrialView trial;
    trial.trial = t;
    trial.values = search.Values(t);
    trial.rung = state.trial_rung[t];
    for (size_t k = 0; k < state.results.size(); ++k) {
      for (const scheduler::AshaResult& r : state.results[k]) {
        if (r.trial != t) continue;
        trial.results.resize(k + 1);
        trial.results[k] = r.metric;
      }
    }
    view.trials.push_back(std::move(trial));
  }
  ASSIGN_OR_RETURN(std::vector<JobRecord> jobs, store_.ListTrials(id));
  for (JobRecord& job : jobs) {
    if (job.trial >= 0 && job.trial < state.trials_started) view.trials[job.trial].job = job;
  }
  return view;
}

}  // namespace weft
