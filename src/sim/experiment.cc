#include "sim/experiment.h"

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "sim/csv.h"

namespace weft::sim {
namespace {

constexpr const char* kColumns[] = {
    "name",       "time",       "application",           "gpus", "eta", "min_epochs",
    "max_epochs", "max_trials", "max_concurrent_trials", "seed"};

}  // namespace

absl::StatusOr<std::vector<SimExperiment>> ReadExperiments(const std::string& path) {
  auto t = ReadCsv(path);
  if (!t.ok()) return t.status();
  std::vector<int> col;
  for (const char* name : kColumns) {
    if (t->Column(name) < 0) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": no column '", name, "'"));
    }
    col.push_back(t->Column(name));
  }
  const int tenant_col = t->Column("tenant"), batch_col = t->Column("batch_sizes");
  std::vector<SimExperiment> out;
  for (size_t i = 0; i < t->rows.size(); ++i) {
    const std::vector<std::string>& r = t->rows[i];
    const std::string line = absl::StrCat(path, ":", i + 2);
    SimExperiment e;
    e.name = r[col[0]];
    if (e.name.empty()) return absl::InvalidArgumentError(line + ": name is empty");
    auto time = ParseNumber(r[col[1]], line + " time");
    if (!time.ok()) return time.status();
    e.submit_s = *time;
    e.app = r[col[2]];
    int64_t v[7];
    for (int k = 0; k < 7; ++k) {
      auto n = ParsePositiveInt(r[col[3 + k]], absl::StrCat(line, " ", kColumns[3 + k]));
      if (!n.ok()) return n.status();
      v[k] = *n;
    }
    e.gpus = static_cast<int>(v[0]);
    e.asha.eta = static_cast<int>(v[1]);
    e.asha.min_resource = v[2];
    e.asha.max_resource = v[3];
    e.asha.max_trials = v[4];
    e.max_concurrent_trials = static_cast<int>(v[5]);
    e.seed = static_cast<uint64_t>(v[6]);
    if (absl::Status s = scheduler::CheckAshaConfig(e.asha); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(line, ": ", s.message()));
    }
    if (tenant_col >= 0) e.tenant = r[tenant_col];
    if (batch_col >= 0 && !r[batch_col].empty()) {
      for (absl::string_view b : absl::StrSplit(r[batch_col], ';')) {
        auto n = ParsePositiveInt(std::string(b), line + " batch_sizes");
        if (!n.ok()) return n.status();
        e.batch_sizes.push_back(static_cast<int>(*n));
      }
    }
    out.push_back(std::move(e));
  }
  return out;
}

absl::StatusOr<ExperimentDriver> ExperimentDriver::Make(const SimExperiment& experiment,
                                                        const AppTrace* app) {
  SimExperiment e = experiment;
  const std::vector<int> validated = app->ValidatedBatchSizes();
  if (e.batch_sizes.empty()) e.batch_sizes = validated;
  for (int b : e.batch_sizes) {
    if (std::find(validated.begin(), validated.end(), b) == validated.end()) {
      return absl::InvalidArgumentError(absl::StrCat("experiment ", e.name, ": ", app->name(),
                                                     " was not measured at batch size ", b));
    }
  }
  if (e.asha.max_resource > app->max_epochs()) {
    return absl::InvalidArgumentError(absl::StrCat("experiment ", e.name, ": max_epochs ",
                                                   e.asha.max_resource, " is more than ",
                                                   app->name(), "'s ", app->max_epochs()));
  }
  if (absl::Status s = scheduler::CheckAshaConfig(e.asha); !s.ok()) return s;
  e.asha.maximize = app->TargetsAt(1.0).higher_is_better;
  std::vector<int> order = e.batch_sizes;
  std::mt19937_64 rng(e.seed);
  std::shuffle(order.begin(), order.end(), rng);
  return ExperimentDriver(std::move(e), app, std::move(order));
}

ExperimentDriver::ExperimentDriver(SimExperiment experiment, const AppTrace* app,
                                   std::vector<int> order)
    : experiment_(std::move(experiment)),
      app_(app),
      order_(std::move(order)),
      asha_(experiment_.asha) {}

void ExperimentDriver::Round(double now, TrialHost& host) {
  if (done()) return;
  for (size_t k = 0; k < trials_.size(); ++k) {
    Trial& t = trials_[k];
    double ended = 0;
    if (t.reported || !host.TrialEnded(t.handle, &ended)) continue;
    const std::optional<double> metric = app_->MetricAfter(t.batch_size, t.epochs);
    // Reported once per rung, at the rung it trains in: Asha cannot refuse it.
    asha_.Report(static_cast<int64_t>(k), t.rung, metric).IgnoreError();
    t.reported = true;
    const std::optional<scheduler::AshaResult> best = asha_.Best();
    if (best && best->metric && best->metric != best_seen_) {
      best_seen_ = best->metric;
      best_found_s_ = ended - experiment_.submit_s;
    }
  }
  while (asha_.Running() < experiment_.max_concurrent_trials) {
    const scheduler::AshaDecision d = asha_.Next();
    if (d.kind == scheduler::AshaDecision::kWait) return;
    if (d.kind == scheduler::AshaDecision::kDone) {
      completion_s_ = experiment_.submit_s;  // when the last trial ended
      for (const Trial& t : trials_) {
        double ended = 0;
        if (host.TrialEnded(t.handle, &ended)) completion_s_ = std::max(completion_s_, ended);
      }
      return;
    }
    const int epochs = static_cast<int>(d.resource);
    if (d.kind == scheduler::AshaDecision::kStart) {
      Trial t;
      t.batch_size = order_[static_cast<size_t>(d.trial) % order_.size()];
      WorkloadJob job;
      job.name = absl::StrCat(experiment_.name, "-t", d.trial);
      job.app = experiment_.app;
      job.tenant = experiment_.tenant;
      job.submit_s = now;
      job.replicas = experiment_.gpus;
      job.batch_size = t.batch_size;
      t.handle = host.StartTrial(job, epochs, now);
      t.epochs = epochs;
      trials_.push_back(t);
    } else {
      Trial& t = trials_[static_cast<size_t>(d.trial)];
      t.rung = d.rung;
      t.epochs = epochs;
      t.reported = false;
      host.PromoteTrial(t.handle, epochs, now);
    }
  }
}

ExperimentResult ExperimentDriver::Result(const TrialHost& host) const {
  ExperimentResult r;
  r.name = experiment_.name;
  r.app = experiment_.app;
  r.submit_s = experiment_.submit_s;
  r.completion_s = completion_s_;
  r.trials = static_cast<int64_t>(trials_.size());
  r.best_found_s = best_found_s_;
  int best_rung = 0;
  if (auto best = asha_.Best(&best_rung); best && best->metric) {
    r.best = best->metric;
    r.best_batch_size = trials_[static_cast<size_t>(best->trial)].batch_size;
  }
  const bool up = experiment_.asha.maximize;
  bool first = true;
  for (int b : experiment_.batch_sizes) {
    const double m = app_->MetricAfter(b, static_cast<int>(experiment_.asha.max_resource))
                         .value_or(up ? -1e300 : 1e300);
    if (first || (up ? m > r.grid_best : m < r.grid_best)) r.grid_best = m;
    first = false;
  }
  r.grid_epochs =
      static_cast<int64_t>(experiment_.batch_sizes.size()) * experiment_.asha.max_resource;
  for (size_t k = 0; k < trials_.size(); ++k) {
    const Trial& t = trials_[k];
    TrialResult tr;
    tr.name = absl::StrCat(experiment_.name, "-t", k);
    tr.batch_size = t.batch_size;
    tr.epochs = t.epochs;
    tr.rung = t.rung;
    if (t.reported) tr.metric = app_->MetricAfter(t.batch_size, t.epochs);
    tr.gpu_seconds = host.TrialGpuSeconds(t.handle);
    tr.restarts = host.TrialRestarts(t.handle);
    r.epochs += t.epochs;
    r.gpu_seconds += tr.gpu_seconds;
    r.trial_results.push_back(std::move(tr));
  }
  return r;
}

}  // namespace weft::sim
