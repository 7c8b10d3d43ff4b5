// weft-sim: replays a cluster workload through one of weft's scheduling policies (the code in
// src/scheduler/ that weftd runs) and reports job completion times. See docs/simulation.md.
#include <cmath>
#include <iostream>

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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"weft-sim: trace-driven simulation of weft's scheduling policies"};
  std::string policy_name, workloads, app_traces, out_dir;
  weft::sim::SimOptions opts;
  bool plot = false, quiet = false;
  app.add_option("--policy", policy_name, "fifo | tiresias | optimus | goodput | fairshare")->required();
  app.add_option("--workloads", workloads,
                 "a workload CSV (Pollux format or a Philly log) or a directory of them")
      ->required();
  app.add_option("--app-traces", app_traces, "directory of application traces (Pollux format)");
  app.add_option("--nodes", opts.nodes,
                 "nodes in the cluster; 0 sizes it from a Philly log's demand")
      ->capture_default_str();
  app.add_option("--gpus-per-node", opts.gpus_per_node)->capture_default_str();
  app.add_option("--interval", opts.interval_s, "seconds between scheduling rounds")
      ->capture_default_str();
  app.add_option("--restart-delay", opts.restart_delay_s,
                 "seconds without progress after each reallocation")
      ->capture_default_str();
  app.add_option("--out", out_dir, "write per-job CSVs, summary.json (and plots) here");
  app.add_flag("--plot", plot, "with --out: JCT CDF and allocation PNGs (needs gnuplot)");
  app.add_flag("-q,--quiet", quiet, "only the final JSON line");
  CLI11_PARSE(app, argc, argv);

  auto policy = weft::scheduler::MakePolicy(policy_name);
  if (!policy.ok()) {
    std::cerr << "weft-sim: --policy: " << policy.status().message() << "\n";
    return 2;
  }
  if (plot && out_dir.empty()) {
    std::cerr << "weft-sim: --plot needs --out DIR\n";
    return 2;
  }
  auto files = weft::sim::WorkloadFiles(workloads);
  if (!files.ok()) {
    std::cerr << "weft-sim: --workloads: " << files.status().message() << "\n";
    return 2;
  }
  if (!out_dir.empty()) {
    if (auto s = weft::MakeDirs(out_dir); !s.ok()) {
      std::cerr << "weft-sim: --out: " << s.message() << "\n";
      return 1;
    }
  }
  weft::sim::AppCatalog apps(app_traces);
  std::vector<weft::sim::SimResult> results;
  const bool auto_nodes = opts.nodes == 0;
  for (const std::string& f : *files) {
    int skipped = 0;
    auto w = weft::sim::ReadWorkload(f, &skipped);
    if (!w.ok()) {
      std::cerr << "weft-sim: " << w.status().message() << "\n";
      return 2;
    }
    if (!w->duration_jobs && app_traces.empty()) {
      std::cerr << "weft-sim: " << f << " is a Pollux workload: --app-traces DIR is required\n";
      return 2;
    }
    weft::sim::SimOptions run = opts;
    if (auto_nodes) run.nodes = NodesForTrace(*w, opts.gpus_per_node);
    if (!quiet) {
      std::cerr << absl::StrFormat("weft-sim: %s: %d jobs%s on %d nodes × %d GPUs, policy %s\n", w->name,
                                   w->jobs.size(),
                                   skipped ? absl::StrCat(" (", skipped, " without GPUs or duration skipped)") : "",
                                   run.nodes, run.gpus_per_node, policy_name);
    }
    // Policies keep state across rounds (Tiresias's queues): a fresh one per workload.
    auto fresh = weft::scheduler::MakePolicy(policy_name);
    auto r = weft::sim::Simulate(*w, apps, **fresh, weft::sim::JobModeFor(policy_name), run);
    if (!r.ok()) {
      std::cerr << "weft-sim: " << w->name << ": " << r.status().message() << "\n";
      return 1;
    }
    if (!out_dir.empty()) {
      auto s = weft::sim::WriteJobsCsv(*r, absl::StrCat(out_dir, "/", policy_name, "-", w->name, ".csv"));
      if (!s.ok()) {
        std::cerr << "weft-sim: " << s.message() << "\n";
        return 1;
      }
    }
    results.push_back(std::move(*r));
  }
  nlohmann::json summary = weft::sim::RunJson(policy_name, results);
  if (!out_dir.empty()) {
    auto s = weft::WriteFileAtomic(absl::StrCat(out_dir, "/", policy_name, "-summary.json"), summary.dump(2) + "\n");
    if (s.ok() && plot) {
      s = weft::sim::Plot(policy_name, results, out_dir);
    }
    if (!s.ok()) {
      std::cerr << "weft-sim: " << s.message() << "\n";
      return 1;
    }
  }
  if (!quiet) std::cout << weft::sim::Table(results);
  nlohmann::json last = summary;
  last.erase("workloads");
  std::cout << last.dump() << std::endl;
  return 0;
}
