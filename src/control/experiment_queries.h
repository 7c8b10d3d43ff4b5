// The experiments as the API reads them: each read takes its caller and answers NotFound for
// another tenant's experiment, as if it did not exist (the admin reads every one), like
// JobQueries for jobs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "control/tenancy.h"
#include "job/experiment_spec.h"
#include "job/job.h"
#include "store/store.h"

namespace weft {

// One trial of an experiment as its search and its job leave it.
struct TrialView {
  int64_t trial = 0;       // 0-based; its job's name is TrialName(spec, trial)
  Hyperparameters values;  // the trial's values of the search space
  int rung = 0;            // the rung it was last started in (0-based)
  // Its metric at the end of each rung it ended, from rung 0 on; nullopt: it failed there.
  std::vector<std::optional<double>> results;
  std::optional<JobRecord> job;  // nullopt: the job is gone (deleted)
};

// One rung of an ASHA search: what a trial has trained in all at its end, and how many trials
// ended it and were promoted out of it.
struct RungView {
  int64_t epochs = 0;
  int64_t results = 0;
  int64_t promoted = 0;
};

struct ExperimentView {
  ExperimentRecord record;
  ExperimentSpec spec;
  std::vector<RungView> rungs;
  std::vector<TrialView> trials;  // by trial
};

// Thread-safety: safe to call from any thread (the store serializes); it holds no state.
class ExperimentQueries {
 public:
  explicit ExperimentQueries(Store& store) : store_(store) {}

  // Experiment `id`. NotFound when there is none or it is not the caller's.
  absl::StatusOr<ExperimentRecord> Find(const Caller& caller, const std::string& id) const;
  // The caller's experiments (every tenant's for the admin), oldest first.
  absl::StatusOr<std::vector<ExperimentRecord>> List(const Caller& caller) const;
  // Experiment `id` with its parsed manifest, its rungs and its trials. NotFound as Find;
  // DataLoss when its stored manifest or search state does not parse (it is then FAILED, and
  // Find still reads it).
  absl::StatusOr<ExperimentView> Show(const Caller& caller, const std::string& id) const;

 private:
  Store& store_;
};

}  // namespace weft
