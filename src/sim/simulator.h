// weft-sim's discrete-round cluster simulator (the Pollux OSDI'21 artifact's model,
// ../shared/traces/SIM-MODEL.md): every `interval_s` the active jobs and the nodes go to a
// scheduler::Policy — the same interface weftd calls — and its decisions are applied with a
// restart delay; between rounds jobs progress at the rate their measured traces give.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/policy.h"
#include "sim/experiment.h"
#include "sim/workload.h"

namespace weft::sim {

struct SimOptions {
  int nodes = 16;
  int gpus_per_node = 4;
  int interval_s = 60;       // Δ, seconds between scheduling rounds
  int restart_delay_s = 30;  // no progress after every non-empty reallocation
  // Each trace job's deliver target is the metric its application's curve reaches at this
  // fraction of the job's total progress (AppTrace::TargetsAt; docs/simulation.md "Targets").
  double deliver_fraction = 0.6;
  // Give every learner (a GPU) a device index after each round's decisions, as weftd does
  // (scheduler/devices.h), and stop the run if one is ever given twice. Off: counts only. The
  // policies decide counts either way, so the JCTs are the same.
  bool gpu_devices = true;
};

// How the policy may treat a job's size and batch (SIM-MODEL.md §3).
enum class JobMode {
  kRigid,              // gang of the requested GPUs at the requested batch (FIFO, Tiresias)
  kElasticFixedBatch,  // any number of GPUs, the requested batch (Optimus)
  kAdaptive,           // any number of GPUs, batch re-chosen for goodput (goodput, targets)
};
// The mode the named policy's jobs run in; kRigid for unknown names.
JobMode JobModeFor(const std::string& policy);

struct JobResult {
  std::string name;
  std::string app;
  int replicas = 0;  // requested
  double submit_s = 0;
  double start_s = -1;       // first allocation; -1 if never started
  double completion_s = -1;  // -1 if not completed
  double jct_s = -1;         // completion − submission
  // When its progress reached the deliver target's (trace jobs; -1 for duration jobs or if
  // never), and that minus submission.
  double deliver_s = -1;
  double time_to_deliver_s = -1;
  int restarts = 0;
  double gpu_seconds = 0;  // attained service
  // The devices of its first allocation, "node:index" (with SimOptions::gpu_devices).
  std::vector<std::string> first_gpus;
};

struct SimResult {
  std::string workload;
  std::string policy;
  std::vector<JobResult> jobs;  // in workload order
  double avg_jct_s = 0, p50_jct_s = 0, p99_jct_s = 0;
  // Mean time from submission to the deliver target over the jobs that have one (0 if none).
  double avg_time_to_deliver_s = 0;
  double makespan_s = 0;       // max(submission + JCT)
  double gpu_utilisation = 0;  // attained GPU-seconds / (GPUs × makespan)
  int restarts = 0;            // total over jobs
  int total_gpus = 0;          // cluster size simulated
  int rounds = 0;              // policy calls
  double policy_seconds = 0;   // wall time spent inside the policy
  // (time s, GPUs allocated) after each round's decisions.
  std::vector<std::pair<double, int>> allocated_gpus;
  // The experiments run beside the workload, in the order given; their trials are not among
  // `jobs` nor in the JCTs, but their GPU time is in gpu_utilisation and their end in makespan.
  std::vector<ExperimentResult> experiments;
};

// Runs `workload` and `experiments` (sim/experiment.h) to completion under `policy`. Trace jobs
// and trials look their applications up in `apps`. InvalidArgument if a job or a trial asks for
// more GPUs than the cluster has (rigid modes), an experiment's space or searcher is refused, or
// a policy over-commits a node; OutOfRange if a placement falls outside an application's
// measurements.
absl::StatusOr<SimResult> Simulate(const Workload& workload, AppCatalog& apps,
                                   scheduler::Policy& policy, JobMode mode,
                                   const SimOptions& options,
                                   const std::vector<SimExperiment>& experiments = {});

// numpy.percentile's linear interpolation; 0 for an empty vector.
double Percentile(std::vector<double> values, double q);

}  // namespace weft::sim
