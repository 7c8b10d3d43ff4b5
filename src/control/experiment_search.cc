#include "control/experiment_search.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace weft {
namespace {

using json = nlohmann::json;
using scheduler::AshaResult;
using scheduler::AshaState;

constexpr int kStateVersion = 1;

// Reads `j` into `state`; false when it is not a state of a search with `rungs` rungs.
bool StateFromJson(const json& j, size_t rungs, int64_t max_trials, AshaState* state) {
  if (!j.is_object() || j.value("version", 0) != kStateVersion) return false;
  const json& started = j.at("trials_started");
  const json& trial_rung = j.at("trial_rung");
  const json& results = j.at("results");
  const json& promoted = j.at("promoted");
  if (!started.is_number_integer() || !trial_rung.is_array() || !results.is_array() ||
      !promoted.is_array() || results.size() != rungs || promoted.size() != rungs) {
    return false;
  }
  state->trials_started = started.get<int64_t>();
  if (state->trials_started < 0 || state->trials_started > max_trials ||
      trial_rung.size() != static_cast<size_t>(state->trials_started)) {
    return false;
  }
  const auto in_range = [&](const json& t) {
    return t.is_number_integer() && t.get<int64_t>() >= 0 &&
           t.get<int64_t>() < state->trials_started;
  };
  for (const json& r : trial_rung) {
    if (!r.is_number_integer() || r.get<int64_t>() < 0 || r.get<size_t>() >= rungs) return false;
    state->trial_rung.push_back(r.get<int>());
  }
  state->results.resize(rungs);
  state->promoted.resize(rungs);
  for (size_t k = 0; k < rungs; ++k) {
    if (!results[k].is_array() || !promoted[k].is_array()) return false;
    for (const json& r : results[k]) {
      if (!r.is_object() || !in_range(r.at("trial"))) return false;
      const json& m = r.at("metric");
      if (!m.is_null() && !m.is_number()) return false;
      AshaResult result{r.at("trial").get<int64_t>(), std::nullopt};
      if (m.is_number()) result.metric = m.get<double>();
      state->results[k].push_back(result);
    }
    for (const json& t : promoted[k]) {
      if (!in_range(t)) return false;
      state->promoted[k].push_back(t.get<int64_t>());
    }
  }
  return true;
}

}  // namespace

scheduler::AshaConfig SearcherConfig(const ExperimentSpec& spec) {
  scheduler::AshaConfig c;
  c.max_trials = spec.max_trials;
  c.maximize = spec.maximize();
  c.max_resource = spec.max_resource;
  if (spec.searcher == "asha") {
    c.eta = spec.eta;
    c.min_resource = spec.min_resource;
  } else {
    c.min_resource = spec.max_resource;  // one rung: every trial trains to the end
  }
  if (spec.searcher == "grid") c.max_trials = std::min(c.max_trials, GridSize(spec.space));
  return c;
}

absl::StatusOr<ExperimentSearch> ExperimentSearch::Restore(const ExperimentSpec& spec,
                                                           const std::string& state_json) {
  const scheduler::AshaConfig config = SearcherConfig(spec);
  if (state_json.empty()) return ExperimentSearch(spec, scheduler::Asha(config));
  AshaState state;
  bool ok = false;
  try {
    ok = StateFromJson(json::parse(state_json), scheduler::AshaRungResources(config).size(),
                       config.max_trials, &state);
  } catch (const json::exception&) {
    ok = false;
  }
  if (!ok) {
    return absl::DataLossError(
        absl::StrCat("the stored state of experiment ", spec.name,
                     " does not parse or does not fit its manifest's searcher"));
  }
  return ExperimentSearch(spec, scheduler::Asha(config, std::move(state)));
}

Hyperparameters ExperimentSearch::Values(int64_t trial) const {
  if (spec_->searcher == "grid") return GridPoint(spec_->space, trial);
  return SampleTrial(spec_->space, spec_->seed, trial);
}

TrialPlan ExperimentSearch::Next() {
  const scheduler::AshaDecision d = asha_.Next();
  TrialPlan plan;
  plan.kind = d.kind;
  plan.trial = d.trial;
  plan.rung = d.rung;
  plan.epochs = d.resource;
  if (d.kind == scheduler::AshaDecision::kStart || d.kind == scheduler::AshaDecision::kPromote) {
    plan.values = Values(d.trial);
  }
  return plan;
}

absl::Status ExperimentSearch::Report(int64_t trial, int rung, std::optional<double> metric) {
  // A learner's report is untrusted: a metric that is not a finite number counts as a failure
  // (and JSON could not store it).
  if (metric && !std::isfinite(*metric)) metric.reset();
  return asha_.Report(trial, rung, metric);
}

std::string ExperimentSearch::StateJson() const {
  const AshaState& s = asha_.state();
  json results = json::array(), promoted = json::array();
  for (size_t k = 0; k < s.results.size(); ++k) {
    json rung = json::array();
    for (const AshaResult& r : s.results[k]) {
      rung.push_back({{"trial", r.trial}, {"metric", r.metric ? json(*r.metric) : json()}});
    }
    results.push_back(std::move(rung));
    promoted.push_back(s.promoted[k]);
  }
  return json{{"version", kStateVersion},
              {"trials_started", s.trials_started},
              {"trial_rung", s.trial_rung},
              {"results", std::move(results)},
              {"promoted", std::move(promoted)}}
      .dump();
}

}  // namespace weft
