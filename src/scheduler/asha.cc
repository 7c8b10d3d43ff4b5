#include "scheduler/asha.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace weft::scheduler {

absl::Status CheckAshaConfig(const AshaConfig& config) {
  if (config.eta < 2) {
    return absl::InvalidArgumentError(absl::StrCat("eta: must be at least 2, not ", config.eta));
  }
  if (config.min_resource < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_resource: must be at least 1, not ", config.min_resource));
  }
  if (config.max_resource < config.min_resource) {
    return absl::InvalidArgumentError(absl::StrCat("max_resource: ", config.max_resource,
                                                   " is below min_resource ", config.min_resource));
  }
  if (config.max_trials < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_trials: must be at least 1, not ", config.max_trials));
  }
  return absl::OkStatus();
}

std::vector<int64_t> AshaRungResources(const AshaConfig& config) {
  std::vector<int64_t> resources;
  int64_t r = config.min_resource;
  while (r < config.max_resource) {
    resources.push_back(r);
    if (r > config.max_resource / config.eta) break;  // r·η is past R (and may overflow)
    r *= config.eta;
  }
  resources.push_back(config.max_resource);
  return resources;
}

Asha::Asha(AshaConfig config, AshaState state)
    : config_(config), resources_(AshaRungResources(config_)), state_(std::move(state)) {
  state_.results.resize(resources_.size());
  state_.promoted.resize(resources_.size());
  state_.trial_rung.resize(state_.trials_started, 0);
}

bool Asha::Better(const AshaResult& a, const AshaResult& b) const {
  if (a.metric.has_value() != b.metric.has_value()) return a.metric.has_value();
  if (a.metric && *a.metric != *b.metric) {
    return config_.maximize ? *a.metric > *b.metric : *a.metric < *b.metric;
  }
  return a.trial < b.trial;
}

std::optional<int64_t> Asha::Promotable(int k) const {
  std::vector<AshaResult> rung = state_.results[k];
  const size_t top = rung.size() / static_cast<size_t>(config_.eta);
  std::sort(rung.begin(), rung.end(),
            [this](const AshaResult& a, const AshaResult& b) { return Better(a, b); });
  const std::vector<int64_t>& promoted = state_.promoted[k];
  for (size_t i = 0; i < top; ++i) {
    if (!rung[i].metric) break;  // failures rank last: none below is promotable either
    if (std::find(promoted.begin(), promoted.end(), rung[i].trial) == promoted.end()) {
      return rung[i].trial;
    }
  }
  return std::nullopt;
}

bool Asha::HasResult(int64_t trial, int rung) const {
  const std::vector<AshaResult>& results = state_.results[rung];
  return std::any_of(results.begin(), results.end(),
                     [trial](const AshaResult& r) { return r.trial == trial; });
}

int64_t Asha::Running() const {
  int64_t running = 0;
  for (int64_t t = 0; t < state_.trials_started; ++t) {
    if (!HasResult(t, state_.trial_rung[t])) ++running;
  }
  return running;
}

AshaDecision Asha::Next() {
  AshaDecision d;
  const int top = static_cast<int>(resources_.size()) - 1;
  for (int k = top - 1; k >= 0; --k) {
    if (std::optional<int64_t> trial = Promotable(k)) {
      state_.promoted[k].push_back(*trial);
      state_.trial_rung[*trial] = k + 1;
      d.kind = AshaDecision::kPromote;
      d.trial = *trial;
      d.rung = k + 1;
      d.resource = resources_[k + 1];
      return d;
    }
  }
  if (state_.trials_started < config_.max_trials) {
    d.kind = AshaDecision::kStart;
    d.trial = state_.trials_started++;
    state_.trial_rung.push_back(0);
    d.rung = 0;
    d.resource = resources_[0];
    return d;
  }
  d.kind = Running() > 0 ? AshaDecision::kWait : AshaDecision::kDone;
  return d;
}

absl::Status Asha::Report(int64_t trial, int rung, std::optional<double> metric) {
  if (trial < 0 || trial >= state_.trials_started) {
    return absl::InvalidArgumentError(
        absl::StrCat("no trial ", trial, " in this search (", state_.trials_started, " started)"));
  }
  if (rung != state_.trial_rung[trial]) {
    return absl::FailedPreconditionError(absl::StrCat("trial ", trial, " trains in rung ",
                                                      state_.trial_rung[trial], ", not ", rung));
  }
  if (HasResult(trial, rung)) {
    return absl::FailedPreconditionError(
        absl::StrCat("trial ", trial, " already has its result for rung ", rung));
  }
  state_.results[rung].push_back(AshaResult{trial, metric});
  return absl::OkStatus();
}

std::optional<AshaResult> Asha::Best(int* rung) const {
  // Each trial's latest result: the highest rung first, so a trial's earlier ones are skipped.
  std::vector<bool> seen(state_.trials_started, false);
  std::optional<AshaResult> best;
  for (int k = static_cast<int>(state_.results.size()) - 1; k >= 0; --k) {
    for (const AshaResult& r : state_.results[k]) {
      if (r.trial < 0 || r.trial >= state_.trials_started || seen[r.trial]) continue;
      seen[r.trial] = true;
      if (r.metric && (!best || Better(r, *best))) {
        best = r;
        if (rung != nullptr) *rung = k;
      }
    }
  }
  return best;
}

}  // namespace weft::scheduler
