#include "sim/replay.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace weft::sim {

absl::StatusOr<double> IdealSeconds(const AppTrace& app, int batch_size, int replicas,
                                    int gpus_per_node) {
  if (replicas < 1 || gpus_per_node < 1) {
    return absl::InvalidArgumentError("replicas and gpus per node must be >= 1");
  }
  NodeCounts placement;
  for (int left = replicas; left > 0; left -= gpus_per_node) {
    placement.push_back(std::min(left, gpus_per_node));
  }
  const BatchConfig cfg = app.FixedBatch(batch_size, replicas, /*force_accum_single=*/false);
  double seconds = 0;
  for (int e = 0; e < app.max_epochs(); ++e) {
    const double rate = app.ProgressRate(placement, cfg, e);
    if (rate <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(app.name(), ": no measured step time for ",
                                                     replicas, " GPUs at batch ", batch_size));
    }
    seconds += (app.EpochStart(e + 1) - app.EpochStart(e)) / rate;
  }
  return seconds;
}

namespace {

absl::Status CheckOptions(const ReplayOptions& o) {
  auto bad = [](const std::string& field, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
  };
  if (o.jobs < 1) return bad("jobs", "must be >= 1");
  if (!(o.time_scale > 0)) return bad("time_scale", "must be > 0");
  if (!(o.work_scale > 0)) return bad("work_scale", "must be > 0");
  if (o.learner_cap < 1) return bad("learner_cap", "must be >= 1");
  if (o.min_epochs < 1 || o.max_epochs < o.min_epochs) {
    return bad("epochs", "need 1 <= min_epochs <= max_epochs");
  }
  if (o.gpus_per_node < 1) return bad("gpus_per_node", "must be >= 1");
  if (!(o.deliver_fraction > 0 && o.deliver_fraction <= 1)) {
    return bad("deliver_fraction", "must be in (0, 1]");
  }
  if (o.train_samples < 1 || o.test_samples < 1 || o.batch_size < 1) {
    return bad("data", "train_samples, test_samples and batch_size must be >= 1");
  }
  if (!(o.cpus > 0)) return bad("cpus", "must be > 0");
  if (std::isnan(o.resize_seconds) || o.resize_seconds > 3600) {
    return bad("resize_seconds", "must be at most 3600 (negative: weft-sim's restart delay)");
  }
  for (const auto& [model, p] : o.profiles) {
    if (!(p.epoch_seconds > 0)) return bad(absl::StrCat(model, ".epoch_seconds"), "must be > 0");
    if (static_cast<int>(p.accuracy.size()) < o.max_epochs) {
      return bad(
          absl::StrCat(model, ".accuracy"),
          absl::StrCat("has ", p.accuracy.size(), " epochs, the budget goes to ", o.max_epochs));
    }
  }
  return absl::OkStatus();
}

std::string Manifest(const ReplayJob& j, const ReplayOptions& o) {
  const std::string model =
      j.model == "cnn" ? "{architecture: cnn}" : "{architecture: mlp, hidden_units: [128]}";
  const std::string learners =
      j.min_learners == j.max_learners
          ? absl::StrCat(j.max_learners)
          : absl::StrCat("{min: ", j.min_learners, ", max: ", j.max_learners, "}");
  return absl::StrFormat(
      "name: %s\n"
      "model: %s\n"
      "data: {dataset: fashion-mnist, train_samples: %d, test_samples: %d}\n"
      "training: {epochs: %d, batch_size: %d, threads: 1, seed: %d}\n"
      "resources: {learners: %s, cpus: %g, memory_mb: 1024}\n"
      "checkpoint: {every_seconds: 30}\n"
      "targets: {deliver: %.4f}\n",
      j.name, model, o.train_samples, o.test_samples, j.epochs, o.batch_size, o.seed, learners,
      o.cpus, j.deliver_accuracy);
}

}  // namespace

absl::StatusOr<std::vector<ReplayJob>> PlanReplay(const Workload& w, AppCatalog& apps,
                                                  const ReplayOptions& o) {
  if (absl::Status s = CheckOptions(o); !s.ok()) return s;
  if (!w.needs_apps()) {
    return absl::InvalidArgumentError(absl::StrCat(
        w.name, ": not a Pollux workload: it has no applications to take curves from"));
  }
  std::vector<WorkloadJob> jobs = w.jobs;
  std::stable_sort(jobs.begin(), jobs.end(), [](const WorkloadJob& a, const WorkloadJob& b) {
    return a.submit_s < b.submit_s;
  });
  if (static_cast<int>(jobs.size()) > o.jobs) jobs.resize(o.jobs);
  std::vector<ReplayJob> plan;
  for (const WorkloadJob& t : jobs) {
    absl::StatusOr<const AppTrace*> app = apps.Get(t.app);
    if (!app.ok()) return app.status();
    ReplayJob j;
    j.name = t.name;
    j.app = t.app;
    auto model = o.model_of_app.find(t.app);
    j.model = model == o.model_of_app.end() ? "mlp" : model->second;
    auto profile = o.profiles.find(j.model);
    if (profile == o.profiles.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("profiles: no profile of model ", j.model, " (application ", t.app, ")"));
    }
    j.trace_submit_s = t.submit_s;
    j.submit_s = (t.submit_s - jobs.front().submit_s) * o.time_scale;
    j.replicas = t.replicas;
    j.max_learners = std::clamp(t.replicas, 1, o.learner_cap);
    j.min_learners = o.elastic ? 1 : j.max_learners;
    absl::StatusOr<double> seconds = IdealSeconds(**app, t.batch_size, t.replicas, o.gpus_per_node);
    if (!seconds.ok())
      return absl::InvalidArgumentError(absl::StrCat(t.name, ": ", seconds.status().message()));
    j.trace_gpu_seconds = *seconds * t.replicas;
    const double epochs = j.trace_gpu_seconds * o.work_scale / profile->second.epoch_seconds;
    j.epochs = std::clamp(static_cast<int>(std::lround(epochs)), o.min_epochs, o.max_epochs);
    const AppTrace::Targets targets = (*app)->TargetsAt(o.deliver_fraction);
    j.deliver_epoch_fraction = targets.deliver_progress / (*app)->EpochStart((*app)->max_epochs());
    j.deliver_epoch = std::clamp(
        static_cast<int>(std::ceil(j.deliver_epoch_fraction * j.epochs - 1e-9)), 1, j.epochs);
    j.deliver_accuracy = profile->second.accuracy[j.deliver_epoch - 1] - o.deliver_margin;
    j.manifest = Manifest(j, o);
    plan.push_back(std::move(j));
  }
  return plan;
}

absl::StatusOr<std::map<std::string, ModelProfile>> ParseProfiles(const nlohmann::json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("profiles: must be an object");
  std::map<std::string, ModelProfile> out;
  for (const auto& [model, v] : j.items()) {
    const std::string field = absl::StrCat("profiles.", model);
    if (model != "cnn" && model != "mlp") {
      return absl::InvalidArgumentError(absl::StrCat(field, ": the models are cnn and mlp"));
    }
    if (!v.is_object() || !v.contains("epoch_seconds") || !v["epoch_seconds"].is_number() ||
        !v.contains("accuracy") || !v["accuracy"].is_array()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": needs epoch_seconds (a number) and accuracy (a list)"));
    }
    ModelProfile p;
    p.epoch_seconds = v["epoch_seconds"].get<double>();
    for (const nlohmann::json& a : v["accuracy"]) {
      if (!a.is_number() || a.get<double>() < 0 || a.get<double>() > 1) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, ".accuracy: each value must be a number in [0, 1]"));
      }
      p.accuracy.push_back(a.get<double>());
    }
    if (v.contains("epoch_seconds_by_learners")) {
      const nlohmann::json& by = v["epoch_seconds_by_learners"];
      const std::string bad_by = absl::StrCat(field, ".epoch_seconds_by_learners");
      if (!by.is_object()) {
        return absl::InvalidArgumentError(
            absl::StrCat(bad_by, ": must be an object of learners to seconds"));
      }
      for (const auto& [learners, seconds] : by.items()) {
        int n = 0;
        if (!absl::SimpleAtoi(learners, &n) || n < 1 || n > 1024 || !seconds.is_number() ||
            !(seconds.get<double>() > 0) || !std::isfinite(seconds.get<double>())) {
          return absl::InvalidArgumentError(absl::StrCat(
              bad_by, ".", learners, ": needs learners from 1 to 1024 and seconds > 0"));
        }
        p.by_learners.emplace_back(n, seconds.get<double>());
      }
      std::sort(p.by_learners.begin(), p.by_learners.end());  // JSON's keys sort as text
    }
    if (v.contains("start_seconds")) {
      const nlohmann::json& start = v["start_seconds"];
      if (!start.is_number() || !(start.get<double>() >= 0) || start.get<double>() > 3600) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, ".start_seconds: must be a number of seconds in [0, 3600]"));
      }
      p.start_seconds = start.get<double>();
    }
    out[model] = std::move(p);
  }
  return out;
}

std::string SimCsv(const std::vector<ReplayJob>& plan, const ReplayOptions& o) {
  bool by_learners = false, costs = false;
  for (const ReplayJob& j : plan) {
    by_learners |= !o.profiles.at(j.model).by_learners.empty();
    costs |= o.profiles.at(j.model).start_seconds >= 0;
  }
  std::string out =
      "name,time,min_learners,max_learners,epochs,deliver_epochs,learner_seconds_per_epoch";
  if (by_learners) out += ",learner_seconds_by_learners";
  out += costs ? ",start_seconds,resize_seconds\n" : "\n";
  for (const ReplayJob& j : plan) {
    const ModelProfile& p = o.profiles.at(j.model);
    absl::StrAppendFormat(&out, "%s,%.3f,%d,%d,%d,%d,%.4f", j.name, j.submit_s, j.min_learners,
                          j.max_learners, j.epochs, j.deliver_epoch, p.epoch_seconds);
    if (by_learners) {
      out += ',';
      for (size_t k = 0; k < p.by_learners.size(); ++k) {
        absl::StrAppendFormat(&out, "%s%d:%.4f", k == 0 ? "" : " ", p.by_learners[k].first,
                              p.by_learners[k].second);
      }
    }
    if (costs) {  // an empty field: weft-sim's restart delay
      out += p.start_seconds >= 0 ? absl::StrFormat(",%.3f", p.start_seconds) : ",";
      out += o.resize_seconds >= 0 ? absl::StrFormat(",%.3f", o.resize_seconds) : ",";
    }
    out += '\n';
  }
  return out;
}

nlohmann::json PlanJson(const std::vector<ReplayJob>& plan, const ReplayOptions& o) {
  nlohmann::json jobs = nlohmann::json::array();
  for (const ReplayJob& j : plan) {
    jobs.push_back({{"name", j.name},
                    {"app", j.app},
                    {"model", j.model},
                    {"trace_submit_s", j.trace_submit_s},
                    {"submit_s", j.submit_s},
                    {"replicas", j.replicas},
                    {"min_learners", j.min_learners},
                    {"max_learners", j.max_learners},
                    {"trace_gpu_seconds", j.trace_gpu_seconds},
                    {"epochs", j.epochs},
                    {"deliver_epoch_fraction", j.deliver_epoch_fraction},
                    {"deliver_epoch", j.deliver_epoch},
                    {"deliver_accuracy", j.deliver_accuracy}});
  }
  return {{"options",
           {{"jobs", o.jobs},
            {"time_scale", o.time_scale},
            {"work_scale", o.work_scale},
            {"learner_cap", o.learner_cap},
            {"elastic", o.elastic},
            {"min_epochs", o.min_epochs},
            {"max_epochs", o.max_epochs},
            {"deliver_fraction", o.deliver_fraction},
            {"deliver_margin", o.deliver_margin},
            {"train_samples", o.train_samples},
            {"test_samples", o.test_samples},
            {"batch_size", o.batch_size},
            {"cpus", o.cpus},
            {"seed", o.seed}}},
          {"jobs", jobs}};
}

}  // namespace weft::sim
