// weft-replay: scales a Pollux workload down to manifests a live weftd runs (src/sim/replay.h,
// docs/simulation.md "Live replay"); bench/cluster_replay.sh submits them at their times.
#include <iostream>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/files.h"
#include "sim/replay.h"
#include "sim/workload.h"

namespace {

struct Flags {
  std::string workload, app_traces, profiles, out_dir;
  weft::sim::ReplayOptions opts;
};

void AddFlags(CLI::App& app, Flags& f) {
  app.add_option("--workload", f.workload, "a Pollux workload CSV")->required();
  app.add_option("--app-traces", f.app_traces, "directory of application traces")->required();
  app.add_option("--profiles", f.profiles,
                 "JSON {cnn|mlp: {epoch_seconds, accuracy: [per epoch]}} of the live models")
      ->required();
  app.add_option("--out", f.out_dir,
                 "writes plan.json, one <job>.yaml per job and sim.csv (weft-sim's input) here")
      ->required();
  weft::sim::ReplayOptions& o = f.opts;
  app.add_option("--jobs", o.jobs, "the workload's first N jobs")->capture_default_str();
  app.add_option("--time-scale", o.time_scale, "live seconds per trace second (arrivals)")
      ->capture_default_str();
  app.add_option("--work-scale", o.work_scale,
                 "live learner-seconds of training per trace GPU-second")
      ->capture_default_str();
  app.add_option("--learner-cap", o.learner_cap, "the most learners a job asks for")
      ->capture_default_str();
  app.add_flag("--elastic", o.elastic, "learners {min: 1, max: capped replicas}");
  app.add_option("--min-epochs", o.min_epochs)->capture_default_str();
  app.add_option("--max-epochs", o.max_epochs)->capture_default_str();
  app.add_option("--train-samples", o.train_samples)->capture_default_str();
  app.add_option("--test-samples", o.test_samples)->capture_default_str();
  app.add_option("--deliver-margin", o.deliver_margin,
                 "the live deliver target is the profile's accuracy minus this")
      ->capture_default_str();
  app.add_option("--cpus", o.cpus, "cpus per learner")->capture_default_str();
  app.add_option("--resize-seconds", o.resize_seconds,
                 "the training an in-place resize costs, for weft-sim's profiled jobs (negative: "
                 "weft-sim's restart delay)")
      ->capture_default_str();
  app.add_option("--seed", o.seed)->capture_default_str();
}

std::string Table(const std::vector<weft::sim::ReplayJob>& plan) {
  std::string out =
      absl::StrFormat("%-16s %-5s %9s %8s %12s %7s %9s %9s\n", "job", "model", "submit s",
                      "learners", "trace GPU-s", "epochs", "deliver@", "deliver");
  for (const weft::sim::ReplayJob& j : plan) {
    absl::StrAppendFormat(
        &out, "%-16s %-5s %9.1f %8s %12.0f %7d %9d %9.4f\n", j.name, j.model, j.submit_s,
        j.min_learners == j.max_learners ? absl::StrCat(j.max_learners)
                                         : absl::StrCat(j.min_learners, "-", j.max_learners),
        j.trace_gpu_seconds, j.epochs, j.deliver_epoch, j.deliver_accuracy);
  }
  return out;
}

int Run(Flags& f) {
  auto text = weft::ReadFile(f.profiles);
  if (!text.ok()) {
    std::cerr << "weft-replay: --profiles: " << text.status().message() << "\n";
    return 2;
  }
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  auto profiles = weft::sim::ParseProfiles(j);
  if (j.is_discarded() || !profiles.ok()) {
    std::cerr << "weft-replay: --profiles: "
              << (j.is_discarded() ? "not JSON" : profiles.status().message()) << "\n";
    return 2;
  }
  f.opts.profiles = std::move(*profiles);
  auto w = weft::sim::ReadWorkload(f.workload);
  if (!w.ok()) {
    std::cerr << "weft-replay: --workload: " << w.status().message() << "\n";
    return 2;
  }
  weft::sim::AppCatalog apps(f.app_traces);
  auto plan = weft::sim::PlanReplay(*w, apps, f.opts);
  if (!plan.ok()) {
    std::cerr << "weft-replay: " << plan.status().message() << "\n";
    return 2;
  }
  absl::Status s = weft::MakeDirs(f.out_dir);
  for (size_t i = 0; s.ok() && i < plan->size(); ++i) {
    const weft::sim::ReplayJob& job = (*plan)[i];
    s = weft::WriteFileAtomic(absl::StrCat(f.out_dir, "/", job.name, ".yaml"), job.manifest);
  }
  if (s.ok()) {
    s = weft::WriteFileAtomic(absl::StrCat(f.out_dir, "/sim.csv"),
                              weft::sim::SimCsv(*plan, f.opts));
  }
  if (s.ok()) {
    s = weft::WriteFileAtomic(absl::StrCat(f.out_dir, "/plan.json"),
                              weft::sim::PlanJson(*plan, f.opts).dump(2) + "\n");
  }
  if (!s.ok()) {
    std::cerr << "weft-replay: --out: " << s.message() << "\n";
    return 1;
  }
  std::cout << Table(*plan);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"weft-replay: a Pollux workload scaled down to live weftd manifests"};
  Flags f;
  AddFlags(app, f);
  CLI11_PARSE(app, argc, argv);
  return Run(f);
}
