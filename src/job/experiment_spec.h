// An experiment's manifest (`kind: Experiment`, docs/manifest.md "Experiments"): a hyperparameter
// search over a base job. Its trials are jobs of the experiment's tenant, each the base job with
// the trial's values (job/search_space.h); a searcher (random, grid, or ASHA — Li et al., MLSys
// 2020 — scheduler/asha.h) decides which trial trains next and for how many epochs, and the
// experiment's two targets (TRADL's tiers) deliver the first trial model that meets `deliver` and
// stop the search at `complete`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "job/job_spec.h"
#include "job/search_space.h"

namespace weft {

inline constexpr int64_t kMaxExperimentTrials = 1000;
inline constexpr int kMaxConcurrentTrials = 64;

struct ExperimentSpec {
  std::string name;  // as a job's name, at most 56 characters (trial names add "-tNNNN")
  std::string description;
  std::string base;   // the base job (the manifest's `job`), as YAML
  JobSpec base_spec;  // the base job as ParseManifest reads it
  SearchSpace space;
  std::string searcher = "asha";  // random | grid | asha
  // ASHA: the reduction factor and the rungs' resources, in epochs of training; random and grid
  // train every trial for max_resource epochs.
  int eta = 3;
  int64_t min_resource = 1;
  int64_t max_resource = 0;  // default: the base job's training.epochs
  int64_t max_trials = 16;   // grid: default and at most the grid's size
  int max_concurrent_trials = 2;
  uint64_t seed = 0;
  std::string metric = "test_accuracy";  // test_accuracy (maximised) | test_loss (minimised)
  // The experiment's targets on the metric test_accuracy: 0 when absent.
  double deliver = 0;
  double complete = 0;

  bool maximize() const { return metric == "test_accuracy"; }
};

// Parses and validates an experiment manifest (YAML or JSON). InvalidArgument listing every
// problem, each naming its field: the experiment's own ("search.eta"), the base job's under
// `job.` ("job.training.batch_size"), and the space's under `search.space.` — including a value of
// the space that would make an invalid job ("search.space.training.batch_size: the value 0
// makes …"). When `errors` is given it receives them one by one.
absl::StatusOr<ExperimentSpec> ParseExperiment(std::string_view text,
                                               std::vector<FieldError>* errors = nullptr);

// The name of the experiment's trial `trial` (0-based): "<name>-t<trial>".
std::string TrialName(const ExperimentSpec& experiment, int64_t trial);

// The job manifest of trial `trial` with `values`, trained for `epochs` epochs in all; below
// max_resource it checkpoints at the end (checkpoint.at_end), so that a promotion resumes it.
// InvalidArgument when the values make an invalid job (TrialManifest).
absl::StatusOr<std::string> TrialJobManifest(const ExperimentSpec& experiment, int64_t trial,
                                             const Hyperparameters& values, int64_t epochs);

}  // namespace weft
