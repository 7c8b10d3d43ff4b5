// weft-sim: replays a cluster workload through one of weft's scheduling policies (the code in
// src/scheduler/ that weftd runs) and reports job completion times. See docs/simulation.md.
#include <cmath>
#include <iostream>
#include <optional>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/files.h"
#include "scheduler/policies.h"
#include "sim/report.h"
#include "sim/simulator.h"
#include "sim/workload.h"

namespace {

// A cluster big enough for the trace's widest job and its average GPU demand with headroom:
// max(widest job, ceil(demand × 1.25)) GPUs, in whole nodes. Used for Philly replays.
int NodesForTrace(const weft::sim::Workload& w, int gpus_per_node) {
  double gpu_seconds = 0, span = 1;
  int widest = 1;
  for (const auto& j : w.jobs) {
    gpu_seconds += j.duration_s * j.replicas;
    span = std::max(span, j.submit_s + j.duration_s);
    widest = std::max(widest, j.replicas);
  }
  double gpus = std::max<double>(widest, std::ceil(1.25 * gpu_seconds / span));
  return static_cast<int>(std::ceil(gpus / gpus_per_node));
}

// The command line, parsed.
struct Flags {
  std::string policy_name, workloads, app_traces, out_dir, experiments_file;
  std::vector<weft::sim::SimExperiment> experiments;  // read from experiments_file
  weft::sim::SimOptions opts;
  bool plot = false, quiet = false;
  bool elastic = false;  // every job elastic, whatever the policy's default mode
};

void AddFlags(CLI::App& app, Flags& f) {
  app.add_option("--policy", f.policy_name,
                 "fifo | tiresias | optimus | goodput | targets | fairshare")
      ->required();
  app.add_option(
         "--workloads", f.workloads,
         "a workload CSV (Pollux format, a Philly log or weft-replay's sim.csv) or a directory "
         "of them")
      ->required();
  app.add_option("--app-traces", f.app_traces, "directory of application traces (Pollux format)");
  app.add_option("--nodes", f.opts.nodes,
                 "nodes in the cluster; 0 sizes it from a Philly log's demand")
      ->capture_default_str();
  app.add_option("--gpus-per-node", f.opts.gpus_per_node)->capture_default_str();
  app.add_option("--interval", f.opts.interval_s, "seconds between scheduling rounds")
      ->capture_default_str();
  app.add_option("--restart-delay", f.opts.restart_delay_s,
                 "seconds without progress after each reallocation")
      ->capture_default_str();
  app.add_option("--experiments", f.experiments_file,
                 "a CSV of hyperparameter searches (ASHA over the batch size) run beside each "
                 "workload: name,time,application,gpus,eta,min_epochs,max_epochs,max_trials,"
                 "max_concurrent_trials,seed[,tenant][,batch_sizes] (docs/simulation.md)");
  app.add_option("--out", f.out_dir, "write per-job CSVs, summary.json (and plots) here");
  app.add_flag("--plot", f.plot, "with --out: JCT CDF and allocation PNGs (needs gnuplot)");
  app.add_flag("-q,--quiet", f.quiet, "only the final JSON line");
  app.add_flag("--elastic", f.elastic,
               "jobs of a Pollux workload run elastic (1 GPU up to what their batch allows, the "
               "batch fixed) under any policy, e.g. fairshare; default: the policy's own mode");
}

// Simulates one workload file; its result, or the message and exit code of why not.
struct Outcome {
  std::optional<weft::sim::SimResult> result;
  std::string error;
  int exit_code = 0;
};

Outcome RunOne(const Flags& f, const std::string& file, weft::sim::AppCatalog& apps) {
  int skipped = 0;
  auto w = weft::sim::ReadWorkload(file, &skipped);
  if (!w.ok()) return {std::nullopt, std::string(w.status().message()), 2};
  if (w->needs_apps() && f.app_traces.empty()) {
    return {std::nullopt, file + " is a Pollux workload: --app-traces DIR is required", 2};
  }
  weft::sim::SimOptions run = f.opts;
  if (f.opts.nodes == 0) run.nodes = NodesForTrace(*w, f.opts.gpus_per_node);
  if (!f.quiet) {
    std::cerr << absl::StrFormat(
        "weft-sim: %s: %d jobs%s on %d nodes × %d GPUs, policy %s\n", w->name, w->jobs.size(),
        skipped ? absl::StrCat(" (", skipped, " without GPUs or duration skipped)") : "", run.nodes,
        run.gpus_per_node, f.policy_name);
  }
  // Policies keep state across rounds (Tiresias's queues): a fresh one per workload.
  auto policy = weft::scheduler::MakePolicy(f.policy_name);
  const weft::sim::JobMode mode = f.elastic && f.policy_name != "goodput"
                                      ? weft::sim::JobMode::kElasticFixedBatch
                                      : weft::sim::JobModeFor(f.policy_name);
  auto r = weft::sim::Simulate(*w, apps, **policy, mode, run, f.experiments);
  if (!r.ok()) return {std::nullopt, absl::StrCat(w->name, ": ", r.status().message()), 1};
  if (!f.out_dir.empty()) {
    auto s = weft::sim::WriteJobsCsv(
        *r, absl::StrCat(f.out_dir, "/", f.policy_name, "-", w->name, ".csv"));
    if (!s.ok()) return {std::nullopt, std::string(s.message()), 1};
  }
  return {std::move(*r), "", 0};
}

// Checks the flags; the exit code for bad ones (2) or trouble with --out (1), 0 if all is well.
int Validate(Flags& f) {
  if (!f.experiments_file.empty()) {
    auto e = weft::sim::ReadExperiments(f.experiments_file);
    if (!e.ok()) {
      std::cerr << "weft-sim: --experiments: " << e.status().message() << "\n";
      return 2;
    }
    if (f.app_traces.empty()) {
      std::cerr << "weft-sim: --experiments needs --app-traces DIR\n";
      return 2;
    }
    f.experiments = std::move(*e);
  }
  auto policy = weft::scheduler::MakePolicy(f.policy_name);
  if (!policy.ok()) {
    std::cerr << "weft-sim: --policy: " << policy.status().message() << "\n";
    return 2;
  }
  if (f.plot && f.out_dir.empty()) {
    std::cerr << "weft-sim: --plot needs --out DIR\n";
    return 2;
  }
  if (!f.out_dir.empty()) {
    if (auto s = weft::MakeDirs(f.out_dir); !s.ok()) {
      std::cerr << "weft-sim: --out: " << s.message() << "\n";
      return 1;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"weft-sim: trace-driven simulation of weft's scheduling policies"};
  Flags f;
  AddFlags(app, f);
  CLI11_PARSE(app, argc, argv);
  if (int rc = Validate(f); rc != 0) return rc;
  auto files = weft::sim::WorkloadFiles(f.workloads);
  if (!files.ok()) {
    std::cerr << "weft-sim: --workloads: " << files.status().message() << "\n";
    return 2;
  }
  weft::sim::AppCatalog apps(f.app_traces);
  std::vector<weft::sim::SimResult> results;
  for (const std::string& file : *files) {
    Outcome one = RunOne(f, file, apps);
    if (!one.result) {
      std::cerr << "weft-sim: " << one.error << "\n";
      return one.exit_code;
    }
    results.push_back(std::move(*one.result));
  }
  nlohmann::json summary = weft::sim::RunJson(f.policy_name, results);
  if (!f.out_dir.empty()) {
    auto s = weft::WriteFileAtomic(absl::StrCat(f.out_dir, "/", f.policy_name, "-summary.json"),
                                   summary.dump(2) + "\n");
    if (s.ok() && f.plot) s = weft::sim::Plot(f.policy_name, results, f.out_dir);
    if (!s.ok()) {
      std::cerr << "weft-sim: " << s.message() << "\n";
      return 1;
    }
  }
  if (!f.quiet) std::cout << weft::sim::Table(results) << weft::sim::ExperimentTable(results);
  nlohmann::json last = summary;
  last.erase("workloads");
  std::cout << last.dump() << std::endl;
  return 0;
}
