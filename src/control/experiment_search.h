// An experiment's search as weftd runs it (docs/design.md "Hyperparameter search"): the
// experiment's searcher (ASHA, or random and grid as ASHA with one rung) with each trial's values,
// and its whole state as JSON for the store, so that after a restart or a failover the search
// goes on from the stored state and decides exactly as it would have.
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "job/experiment_spec.h"
#include "job/search_space.h"
#include "scheduler/asha.h"

namespace weft {

// What a free trial slot does next.
struct TrialPlan {
  scheduler::AshaDecision::Kind kind = scheduler::AshaDecision::kWait;
  int64_t trial = -1;  // kStart, kPromote: the trial (0-based; its job is TrialName(…, trial))
  int rung = 0;
  int64_t epochs = 0;      // the epochs the trial has trained in all at the end of this rung
  Hyperparameters values;  // the trial's values (the same at every rung)
};

// Thread-safety: none; the controller serialises an experiment's calls.
class ExperimentSearch {
 public:
  // The search of `spec` (which must outlive it) from `state_json` (StateJson() of a search of
  // the same spec; "" for a new search). DataLoss when the state does not parse or does not fit the
  // spec (another rung count, a trial out of range): a stored state is weftd's own, so that means
  // corruption.
  static absl::StatusOr<ExperimentSearch> Restore(const ExperimentSpec& spec,
                                                  const std::string& state_json);

  // The next plan for a free slot (scheduler::Asha::Next), with the trial's values. The caller
  // stores StateJson() with what it does about the plan, in one transaction.
  TrialPlan Next();
  // The metric of `trial` at the end of `rung` (nullopt, NaN or infinite: the trial failed).
  // Errors of scheduler::Asha::Report.
  absl::Status Report(int64_t trial, int rung, std::optional<double> metric);
  // The values of trial `trial`: its grid point, or its draw from the space with the seed.
  Hyperparameters Values(int64_t trial) const;

  std::string StateJson() const;
  const scheduler::Asha& asha() const { return asha_; }

 private:
  ExperimentSearch(const ExperimentSpec& spec, scheduler::Asha asha)
      : spec_(&spec), asha_(std::move(asha)) {}

  const ExperimentSpec* spec_;
  scheduler::Asha asha_;
};

// The searcher's configuration for `spec`: ASHA's as the manifest says; random and grid train
// every trial for max_resource epochs (one rung), and grid draws no more trials than its points.
scheduler::AshaConfig SearcherConfig(const ExperimentSpec& spec);

}  // namespace weft
