#include "sim/report.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/files.h"

namespace weft::sim {

absl::Status WriteJobsCsv(const SimResult& r, const std::string& path) {
  std::string out =
      "name,app,replicas,submit_s,start_s,completion_s,jct_s,restarts,gpu_seconds,deliver_s,"
      "time_to_deliver_s\n";
  for (const JobResult& j : r.jobs) {
    absl::StrAppendFormat(&out, "%s,%s,%d,%.0f,%.0f,%.0f,%.0f,%d,%.0f,%.0f,%.0f\n", j.name, j.app,
                          j.replicas, j.submit_s, j.start_s, j.completion_s, j.jct_s, j.restarts,
                          j.gpu_seconds, j.deliver_s, j.time_to_deliver_s);
  }
  return WriteFileAtomic(path, out);
}

namespace {

nlohmann::json JobsSummaryJson(const SimResult& r) {
  return {{"workload", r.workload},
          {"jobs", r.jobs.size()},
          {"avg_jct", r.avg_jct_s},
          {"avg_time_to_deliver", r.avg_time_to_deliver_s},
          {"p50_jct", r.p50_jct_s},
          {"p99_jct", r.p99_jct_s},
          {"makespan", r.makespan_s},
          {"gpu_utilisation", r.gpu_utilisation},
          {"restarts", r.restarts},
          {"rounds", r.rounds},
          {"policy_seconds", r.policy_seconds}};
}

}  // namespace

nlohmann::json ExperimentJson(const ExperimentResult& e) {
  nlohmann::json trials = nlohmann::json::array();
  for (const TrialResult& t : e.trial_results) {
    trials.push_back({{"name", t.name},
                      {"batch_size", t.batch_size},
                      {"epochs", t.epochs},
                      {"rung", t.rung},
                      {"metric", t.metric ? nlohmann::json(*t.metric) : nlohmann::json()},
                      {"gpu_seconds", t.gpu_seconds},
                      {"restarts", t.restarts}});
  }
  return {{"name", e.name},
          {"app", e.app},
          {"submit_s", e.submit_s},
          {"completion_s", e.completion_s},
          {"duration_s", e.completion_s >= 0 ? e.completion_s - e.submit_s : -1},
          {"trials", e.trials},
          {"epochs", e.epochs},
          {"grid_epochs", e.grid_epochs},
          {"gpu_seconds", e.gpu_seconds},
          {"best", e.best ? nlohmann::json(*e.best) : nlohmann::json()},
          {"best_batch_size", e.best_batch_size},
          {"best_found_s", e.best_found_s},
          {"grid_best", e.grid_best},
          {"trial_results", trials}};
}

nlohmann::json SummaryJson(const SimResult& r) {
  nlohmann::json j = JobsSummaryJson(r);
  if (!r.experiments.empty()) {
    nlohmann::json e = nlohmann::json::array();
    for (const ExperimentResult& x : r.experiments) e.push_back(ExperimentJson(x));
    j["experiments"] = e;
  }
  return j;
}

nlohmann::json RunJson(const std::string& policy, const std::vector<SimResult>& results) {
  nlohmann::json avg = nlohmann::json::object();
  nlohmann::json per = nlohmann::json::array();
  double sum = 0, p99 = 0, makespan = 0, deliver = 0;
  for (const SimResult& r : results) {
    avg[r.workload] = r.avg_jct_s;
    per.push_back(SummaryJson(r));
    sum += r.avg_jct_s;
    deliver += r.avg_time_to_deliver_s;
    p99 += r.p99_jct_s;
    makespan += r.makespan_s;
  }
  double n = results.empty() ? 1 : results.size();
  return {{"policy", policy},        {"avg_jct", avg},
          {"mean_jct", sum / n},     {"mean_time_to_deliver", deliver / n},
          {"mean_p99_jct", p99 / n}, {"mean_makespan", makespan / n},
          {"workloads", per}};
}

std::string Table(const std::vector<SimResult>& results) {
  std::string out = absl::StrFormat("%-14s %6s %10s %10s %10s %11s %11s %6s %8s %9s\n", "workload",
                                    "jobs", "avg JCT s", "p50 JCT s", "p99 JCT s", "deliver s",
                                    "makespan s", "util", "restarts", "policy ms");
  double avg = 0, p50 = 0, p99 = 0, dl = 0, mk = 0, util = 0, pol = 0;
  int restarts = 0;
  size_t jobs = 0;
  for (const SimResult& r : results) {
    double per_round_ms = r.rounds ? 1000 * r.policy_seconds / r.rounds : 0;
    absl::StrAppendFormat(&out, "%-14s %6d %10.1f %10.1f %10.1f %11.1f %11.0f %5.1f%% %8d %9.3f\n",
                          r.workload, r.jobs.size(), r.avg_jct_s, r.p50_jct_s, r.p99_jct_s,
                          r.avg_time_to_deliver_s, r.makespan_s, 100 * r.gpu_utilisation,
                          r.restarts, per_round_ms);
    avg += r.avg_jct_s;
    dl += r.avg_time_to_deliver_s;
    p50 += r.p50_jct_s;
    p99 += r.p99_jct_s;
    mk += r.makespan_s;
    util += r.gpu_utilisation;
    restarts += r.restarts;
    jobs += r.jobs.size();
    pol += per_round_ms;
  }
  if (results.size() > 1) {
    double n = results.size();
    absl::StrAppendFormat(&out, "%-14s %6d %10.1f %10.1f %10.1f %11.1f %11.0f %5.1f%% %8d %9.3f\n",
                          "mean", jobs, avg / n, p50 / n, p99 / n, dl / n, mk / n, 100 * util / n,
                          restarts, pol / n);
  }
  return out;
}

std::string ExperimentTable(const std::vector<SimResult>& results) {
  std::string out;
  for (const SimResult& r : results) {
    for (const ExperimentResult& e : r.experiments) {
      if (out.empty()) {
        out = absl::StrFormat("\n%-14s %-12s %6s %14s %11s %14s %9s %9s\n", "workload",
                              "experiment", "trials", "epochs (grid)", "GPU-s", "best (grid)",
                              "found s", "ended s");
      }
      absl::StrAppendFormat(&out, "%-14s %-12s %6d %6d (%5d) %11.0f %6.4f (%.4f) %9.0f %9.0f\n",
                            r.workload, e.name, e.trials, e.epochs, e.grid_epochs, e.gpu_seconds,
                            e.best.value_or(0), e.grid_best, e.best_found_s,
                            e.completion_s >= 0 ? e.completion_s - e.submit_s : -1);
    }
  }
  return out;
}

absl::Status Plot(const std::string& policy, const std::vector<SimResult>& results,
                  const std::string& out_dir) {
  const int total_gpus = results.empty() ? 1 : results.front().total_gpus;
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    return absl::FailedPreconditionError("--plot needs gnuplot (apt-get install gnuplot-nox)");
  }
  if (results.empty()) return absl::OkStatus();
  std::vector<double> jcts;
  for (const auto& r : results) {
    for (const auto& j : r.jobs) jcts.push_back(j.jct_s);
  }
  std::sort(jcts.begin(), jcts.end());
  std::string cdf;
  for (size_t i = 0; i < jcts.size(); ++i) {
    absl::StrAppendFormat(&cdf, "%.0f %.6f\n", jcts[i], (i + 1.0) / jcts.size());
  }
  std::string util;
  for (const auto& [t, g] : results.front().allocated_gpus) {
    absl::StrAppendFormat(&util, "%.0f %.4f\n", t / 3600.0, static_cast<double>(g) / total_gpus);
  }
  const std::string cdf_path = absl::StrCat(out_dir, "/", policy, "-jct.dat");
  const std::string util_path = absl::StrCat(out_dir, "/", policy, "-allocated.dat");
  if (auto s = WriteFileAtomic(cdf_path, cdf); !s.ok()) return s;
  if (auto s = WriteFileAtomic(util_path, util); !s.ok()) return s;
  std::string script = absl::StrFormat(
      "set terminal pngcairo size 900,500\n"
      "set output '%s/%s-jct-cdf.png'\nset logscale x\nset xlabel 'JCT (s)'\nset ylabel 'fraction "
      "of jobs'\n"
      "set grid\nset key bottom right\nplot '%s' using 1:2 with steps title '%s'\n"
      "set output '%s/%s-allocation.png'\nunset logscale x\nset xlabel 'time (h)'\n"
      "set ylabel 'GPUs allocated (fraction)'\nset yrange [0:1.05]\n"
      "plot '%s' using 1:2 with steps title '%s, %s'\n",
      out_dir, policy, cdf_path, policy, out_dir, policy, util_path, policy,
      results.front().workload);
  const std::string script_path = absl::StrCat(out_dir, "/", policy, "-plot.gp");
  if (auto s = WriteFileAtomic(script_path, script); !s.ok()) return s;
  std::string cmd = absl::StrCat("gnuplot '", script_path, "'");
  if (std::system(cmd.c_str()) != 0) return absl::InternalError("gnuplot failed on " + script_path);
  return absl::OkStatus();
}

}  // namespace weft::sim
