// weft-sim's outputs: per-job CSV, summary JSON, a table for people, gnuplot PNGs.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "sim/simulator.h"

namespace weft::sim {

// name,app,replicas,submit_s,start_s,completion_s,jct_s,restarts,gpu_seconds
absl::Status WriteJobsCsv(const SimResult& r, const std::string& path);

// One workload's summary: jobs, avg/p50/p99 JCT (s), makespan (s), GPU utilisation, restarts,
// rounds, policy seconds, and the experiments run beside it (when there were any).
nlohmann::json SummaryJson(const SimResult& r);

// The run's summary over workloads, as the last line of weft-sim's output: policy, avg_jct per
// workload (s), mean_jct = unweighted mean of the per-workload averages (s), and per workload
// summaries under "workloads".
nlohmann::json RunJson(const std::string& policy, const std::vector<SimResult>& results);

// Fixed-width table: one row per workload and a mean row.
std::string Table(const std::vector<SimResult>& results);

// One row per experiment of each workload's run (empty without experiments): trials, epochs
// trained against a grid's, GPU-seconds, best found against the grid's best, when it was found
// and when the search ended (s from its submission).
std::string ExperimentTable(const std::vector<SimResult>& results);

// An experiment's result as JSON (its trials included).
nlohmann::json ExperimentJson(const ExperimentResult& e);

// PNGs through gnuplot: the JCT CDF (all workloads pooled) and GPUs allocated over time (first
// workload). FailedPrecondition if gnuplot is not installed.
absl::Status Plot(const std::string& policy, const std::vector<SimResult>& results,
                  const std::string& out_dir);

}  // namespace weft::sim
