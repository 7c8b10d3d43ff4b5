// Experiments in weft-sim (docs/simulation.md "Experiments"): a hyperparameter search over an
// application's batch size, run by the same ASHA searcher weftd runs (scheduler/asha.h), whose
// trials are jobs of the simulated cluster under the policy being measured, beside the
// workload's own jobs. What the Pollux traces allow: each application was measured at several
// total batch sizes (validation-<B>.csv), each with its own learning curve, so the batch is a
// real hyperparameter with a measured effect on the metric; nothing else (learning rate, width)
// was measured. A trial trains at its fixed batch on a fixed number of GPUs (rigid policies) or
// 1 GPU up to what the batch allows (elastic ones; adaptive policies may not change a trial's
// batch, it is what the search tries). Epochs are the traces' epochs of progress (P(e)).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/asha.h"
#include "sim/app_trace.h"
#include "sim/workload.h"

namespace weft::sim {

// One experiment, as submitted.
struct SimExperiment {
  std::string name;    // its trials' jobs are "<name>-t<k>"
  std::string tenant;  // its trials' tenant; empty: none (Pollux workloads have none)
  std::string app;
  double submit_s = 0;
  int gpus = 1;  // GPUs a trial asks for
  // The search space: the batch sizes tried; empty: every validated one of the app.
  std::vector<int> batch_sizes;
  // Resources in epochs; `maximize` is set from the app's curve (accuracy up, loss down).
  scheduler::AshaConfig asha;
  int max_concurrent_trials = 4;
  uint64_t seed = 1;
};

// Reads an experiments file: CSV with the header
// name,time,application,gpus,eta,min_epochs,max_epochs,max_trials,max_concurrent_trials,seed
// and optional columns tenant and batch_sizes (the space, ';'-separated: "128;512"; empty:
// every validated batch size of the application). InvalidArgument naming the file, line and column
// on bad input (not a number, a searcher CheckAshaConfig refuses, fewer than 1 GPU or concurrent
// trial).
absl::StatusOr<std::vector<SimExperiment>> ReadExperiments(const std::string& path);

// One trial as it ended.
struct TrialResult {
  std::string name;
  int batch_size = 0;
  int epochs = 0;                // trained in all (the budget of the last rung it reached)
  int rung = 0;                  // the last rung it was started in
  std::optional<double> metric;  // after `epochs`
  double gpu_seconds = 0;        // held, restarts included
  int restarts = 0;              // a promotion resumes it: one each
};

struct ExperimentResult {
  std::string name;
  std::string app;
  double submit_s = 0;
  double completion_s = -1;  // when its last trial's last result came in; -1 if never
  int64_t trials = 0;
  int64_t epochs = 0;          // trained by all its trials
  double gpu_seconds = 0;      // held by all its trials
  std::optional<double> best;  // the best latest result of a trial (Asha::Best)
  int best_batch_size = 0;
  double best_found_s = -1;  // when that result came in, from submission
  // What a grid search of the same space would find: every batch size trained to max_resource
  // (its best metric, and the epochs it would train: |space| × R).
  double grid_best = 0;
  int64_t grid_epochs = 0;
  std::vector<TrialResult> trial_results;  // by trial number
};

// What an experiment needs from the simulation it runs in. Handles are the simulation's own.
class TrialHost {
 public:
  virtual ~TrialHost() = default;
  // Submits `job` (a trial of `app`) now, to train `epochs` epochs and stop; its handle.
  virtual size_t StartTrial(const WorkloadJob& job, int epochs, double now) = 0;
  // Resumes an ended trial from where it stopped (no retraining: its progress is kept, a
  // restart is paid) to train on to `epochs` in all, queued again now.
  virtual void PromoteTrial(size_t handle, int epochs, double now) = 0;
  // Whether the trial has trained its epochs and left the cluster, and when.
  virtual bool TrialEnded(size_t handle, double* when) const = 0;
  virtual double TrialGpuSeconds(size_t handle) const = 0;
  virtual int TrialRestarts(size_t handle) const = 0;
};

// Drives one experiment's search in a simulation: each round, the results of trials that ended
// their rung go to the searcher, then trials are started and promoted while fewer than
// max_concurrent_trials train (ASHA's rule, as in weftd's ExperimentController). A trial's
// batch size is drawn from the space by its number: a seeded permutation of the space, cycled,
// so that the first |space| trials try every batch size once.
class ExperimentDriver {
 public:
  // InvalidArgument if a batch size of the space was not validated for `app`, or the searcher's
  // config is refused.
  static absl::StatusOr<ExperimentDriver> Make(const SimExperiment& experiment,
                                               const AppTrace* app);

  double submit_s() const { return experiment_.submit_s; }
  bool done() const { return completion_s_ >= 0; }
  // One round at time `now` (>= submit_s()).
  void Round(double now, TrialHost& host);
  ExperimentResult Result(const TrialHost& host) const;

 private:
  ExperimentDriver(SimExperiment experiment, const AppTrace* app, std::vector<int> order);

  struct Trial {
    size_t handle = 0;
    int batch_size = 0;
    int rung = 0;
    int epochs = 0;
    bool reported = false;  // the result of its current rung is in
  };

  SimExperiment experiment_;
  const AppTrace* app_;
  std::vector<int> order_;  // batch sizes in the order trials draw them
  scheduler::Asha asha_;
  std::vector<Trial> trials_;
  double completion_s_ = -1;
  double best_found_s_ = -1;
  std::optional<double> best_seen_;
};

}  // namespace weft::sim
