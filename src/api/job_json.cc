#include "api/job_json.h"

#include "absl/strings/str_cat.h"

namespace weft::api {

nlohmann::json TimeJson(std::optional<TimeMs> t) {
  if (!t) return nullptr;
  return FormatTimeMs(*t);
}

nlohmann::json OptionalJson(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

namespace {

nlohmann::json ProgressJson(const JobProgress& p) {
  nlohmann::json j = {{"epoch", p.epoch},
                      {"epochs_total", p.epochs_total},
                      {"step", p.step},
                      {"steps_total", p.steps_total},
                      {"samples", p.samples}};
  j["fraction"] = p.steps_total > 0 ? static_cast<double>(p.step) / p.steps_total : 0.0;
  return j;
}

}  // namespace

nlohmann::json ResourcesJson(const scheduler::Resources& r) {
  return {{"cpus", r.cpus}, {"memory_mb", r.memory_mb}, {"gpus", r.gpus}};
}

nlohmann::json MetricJson(const MetricRecord& m) {
  nlohmann::json j = {{"step", m.step}, {"epoch", m.epoch}, {"wall_time_ms", m.wall_time_ms}};
  if (m.test_accuracy) {
    j["test_accuracy"] = *m.test_accuracy;
    if (m.test_loss) j["test_loss"] = *m.test_loss;
  } else {
    j["train_loss"] = m.train_loss;
    j["samples_per_s"] = m.samples_per_s;
  }
  return j;
}

namespace {

// The current attempt's learners by rank: [{"rank", "id", "node", "pid", "gpus"}], pid null
// before it starts, gpus the indices of its devices on its node.
nlohmann::json LearnersJson(const std::vector<LearnerSlot>& learners) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t rank = 0; rank < learners.size(); ++rank) {
    const LearnerSlot& l = learners[rank];
    out.push_back({{"rank", rank},
                   {"id", l.id},
                   {"node", l.node},
                   {"pid", l.pid > 0 ? nlohmann::json(l.pid) : nlohmann::json(nullptr)},
                   {"gpus", l.gpus}});
  }
  return out;
}

// A scale-out parameter-server job's weft-ps servers: [{"index", "node", "pid", "address"}].
nlohmann::json ServersJson(const std::vector<ServerSlot>& servers) {
  nlohmann::json out = nlohmann::json::array();
  for (const ServerSlot& s : servers) {
    out.push_back({{"index", s.index},
                   {"node", s.node},
                   {"pid", s.pid > 0 ? nlohmann::json(s.pid) : nlohmann::json(nullptr)},
                   {"address", s.address}});
  }
  return out;
}

}  // namespace

nlohmann::json JobSummaryJson(const JobRecord& r, const std::optional<scheduler::Waiting>& waiting,
                              TimeMs now_ms) {
  nlohmann::json j = {
      {"id", r.id},
      {"name", r.name},
      {"tenant", r.tenant},
      {"state", std::string(JobStateName(r.state))},
      {"reason", r.reason},
      {"created_at", FormatTimeMs(r.created_ms)},
      {"updated_at", FormatTimeMs(r.updated_ms)},
      {"attempt", r.attempt},
      {"generation", r.generation},
      {"node", r.learners.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.learners[0].node)},
      {"learners", LearnersJson(r.learners)},
      {"servers", ServersJson(r.servers)},
      {"progress", ProgressJson(r.progress)},
      {"best_test_accuracy", OptionalJson(r.best_test_accuracy)},
      {"gpu_seconds", static_cast<double>(r.GpuMs(now_ms)) / 1000.0},
  };
  nlohmann::json met = nlohmann::json::array();
  if (r.deliver_met_ms) met.push_back("deliver");
  if (r.complete_met_ms) met.push_back("complete");
  j["targets_met"] = std::move(met);
  if (!r.experiment.empty()) {
    j["experiment"] = r.experiment;
    j["trial"] = r.trial;
  }
  if (waiting) {
    j["waiting_code"] = scheduler::WaitCodeName(waiting->code);
    j["waiting_reason"] = waiting->reason;
  }
  return j;
}

nlohmann::json ExperimentSummaryJson(const ExperimentRecord& e) {
  return {{"id", e.id},
          {"name", e.name},
          {"tenant", e.tenant},
          {"state", ExperimentStateName(e.state)},
          {"reason", e.reason},
          {"created_at", FormatTimeMs(e.created_ms)},
          {"updated_at", FormatTimeMs(e.updated_ms)},
          {"best_job", e.best_job.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.best_job)},
          {"best_metric", OptionalJson(e.best_metric)},
          {"delivered_job",
           e.delivered_job.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.delivered_job)},
          {"deliver_met_at", TimeJson(e.deliver_met_ms)},
          {"complete_met_at", TimeJson(e.complete_met_ms)}};
}

nlohmann::json EventJson(const JobEvent& e) {
  if (e.type == JobEventType::kExperiment || e.type == JobEventType::kExperimentDeleted) {
    return {{"experiment", e.experiment ? ExperimentSummaryJson(*e.experiment) : nullptr},
            {"tenant", e.tenant},
            {"time", FormatTimeMs(e.time_ms)}};
  }
  nlohmann::json j = {{"job", e.job},
                      {"tenant", e.tenant},
                      {"time", FormatTimeMs(e.time_ms)},
                      {"state", std::string(JobStateName(e.to))}};
  switch (e.type) {
    case JobEventType::kState:
      j["from"] = e.from ? nlohmann::json(std::string(JobStateName(*e.from))) : nullptr;
      j["reason"] = e.reason;
      break;
    case JobEventType::kWaiting:
      j["reason"] = e.reason;
      break;
    case JobEventType::kProgress: {
      j["progress"] = ProgressJson(e.progress);
      nlohmann::json points = nlohmann::json::array();
      for (const MetricRecord& m : e.points) points.push_back(MetricJson(m));
      j["metrics"] = std::move(points);
      j["best_test_accuracy"] = OptionalJson(e.best_test_accuracy);
      break;
    }
    case JobEventType::kModel:
      if (e.model) {
        const ModelRecord& m = *e.model;
        j["model"] = {{"kind", m.kind},
                      {"test_accuracy", m.test_accuracy},
                      {"epoch", m.epoch},
                      {"step", m.step},
                      {"bytes", m.bytes},
                      {"download", absl::StrCat("/v1/jobs/", e.job, "/model?which=", m.kind)}};
      }
      break;
    case JobEventType::kDeleted:
    case JobEventType::kExperiment:
    case JobEventType::kExperimentDeleted:
      break;
  }
  return j;
}

nlohmann::json JobDetailJson(const JobDetail& d) {
  const JobRecord& r = d.job;
  nlohmann::json j = JobSummaryJson(r, d.waiting, d.now_ms);
  const std::vector<StateEvent>& history = d.history;
  const std::vector<MetricRecord>& recent = d.recent_metrics;

  nlohmann::json h = nlohmann::json::array();
  for (const StateEvent& e : history) {
    h.push_back({{"seq", e.seq},
                 {"time", FormatTimeMs(e.time_ms)},
                 {"from", e.from ? nlohmann::json(std::string(JobStateName(*e.from)))
                                 : nlohmann::json(nullptr)},
                 {"to", std::string(JobStateName(e.to))},
                 {"reason", e.reason}});
  }
  j["history"] = h;

  // Latest metrics: the newest training point and the newest evaluation.
  nlohmann::json latest = nlohmann::json::object();
  for (auto it = recent.rbegin(); it != recent.rend(); ++it) {
    if (!it->test_accuracy && !latest.contains("train_loss")) {
      latest["train_loss"] = it->train_loss;
      latest["samples_per_s"] = it->samples_per_s;
      latest["step"] = it->step;
      latest["epoch"] = it->epoch;
      latest["wall_time_ms"] = it->wall_time_ms;
    }
    if (it->test_accuracy && !latest.contains("test_accuracy")) {
      latest["test_accuracy"] = *it->test_accuracy;
      latest["evaluated_at_step"] = it->step;
    }
  }
  if (r.best_test_accuracy) latest["best_test_accuracy"] = *r.best_test_accuracy;
  j["metrics"] = latest;

  const TargetSpec& t = d.spec.targets;
  nlohmann::json targets = {{"metric", t.metric}};
  if (t.deliver) {
    targets["deliver"] = {{"value", *t.deliver},
                          {"met", r.deliver_met_ms.has_value()},
                          {"met_at", TimeJson(r.deliver_met_ms)}};
  }
  if (t.complete) {
    targets["complete"] = {{"value", *t.complete},
                           {"met", r.complete_met_ms.has_value()},
                           {"met_at", TimeJson(r.complete_met_ms)}};
  }
  j["targets"] = targets;

  nlohmann::json models = nlohmann::json::object();
  for (const ModelRecord& a : d.models) {
    models[a.kind] = {{"path", a.path},
                      {"card_path", a.card_path},
                      {"test_accuracy", a.test_accuracy},
                      {"epoch", a.epoch},
                      {"step", a.step},
                      {"bytes", a.bytes},
                      {"created_at", FormatTimeMs(a.created_ms)},
                      {"download", absl::StrCat("/v1/jobs/", r.id, "/model?which=", a.kind)}};
  }
  j["models"] = models;
  j["spec"] = SpecToJson(d.spec);
  return j;
}

}  // namespace weft::api
