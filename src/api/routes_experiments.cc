// /v1/experiments: hyperparameter searches (control/experiment_controller.h). A tenant submits,
// lists, shows, halts, resumes and deletes its own; another tenant's is 404 as a missing one is.
// The trials are jobs: their curves, logs and models are under /v1/jobs/{trial's job}.
#include "absl/strings/str_cat.h"
#include "api/job_json.h"
#include "api/routes.h"
#include "control/experiment_controller.h"
#include "control/experiment_queries.h"

namespace weft::api {
namespace {

using Request = httplib::Request;
using Response = httplib::Response;

nlohmann::json TrialJson(const TrialView& t) {
  nlohmann::json values = nlohmann::json::object();
  for (const auto& [field, value] : t.values) values[field] = value;
  nlohmann::json results = nlohmann::json::array();
  for (const std::optional<double>& r : t.results) results.push_back(OptionalJson(r));
  nlohmann::json j = {{"trial", t.trial},
                      {"values", std::move(values)},
                      {"rung", t.rung},
                      {"results", std::move(results)},
                      {"job", nullptr}};
  if (t.job) {
    j["job"] = t.job->id;
    j["state"] = JobStateName(t.job->state);
    j["reason"] = t.job->reason;
    j["epoch"] = t.job->progress.epoch;
    j["epochs_total"] = t.job->progress.epochs_total;
    j["best_test_accuracy"] = OptionalJson(t.job->best_test_accuracy);
  }
  return j;
}

// GET /v1/experiments/{id}: the summary, the search's settings, its rungs and its trials.
nlohmann::json ExperimentDetailJson(const ExperimentView& v) {
  nlohmann::json j = ExperimentSummaryJson(v.record);
  const ExperimentSpec& s = v.spec;
  j["description"] = s.description;
  j["searcher"] = {{"name", s.searcher},
                   {"eta", s.eta},
                   {"min_resource", s.min_resource},
                   {"max_resource", s.max_resource},
                   {"max_trials", s.max_trials},
                   {"max_concurrent_trials", s.max_concurrent_trials},
                   {"seed", s.seed}};
  j["metric"] = {{"name", s.metric}, {"goal", s.maximize() ? "maximize" : "minimize"}};
  j["targets"] = {{"deliver", s.deliver > 0 ? nlohmann::json(s.deliver) : nullptr},
                  {"complete", s.complete > 0 ? nlohmann::json(s.complete) : nullptr}};
  nlohmann::json rungs = nlohmann::json::array();
  for (const RungView& r : v.rungs) {
    rungs.push_back({{"epochs", r.epochs}, {"results", r.results}, {"promoted", r.promoted}});
  }
  j["rungs"] = std::move(rungs);
  nlohmann::json trials = nlohmann::json::array();
  for (const TrialView& t : v.trials) trials.push_back(TrialJson(t));
  j["trials"] = std::move(trials);
  j["manifest"] = v.record.manifest;
  return j;
}

void SendNoSuchExperiment(Response& res, const std::string& id) {
  SendError(res, 404, absl::StrCat("no experiment '", id, "'"));
}

void ListExperiments(const Services& s, const Request&, Response& res, const Caller& caller) {
  auto list = s.experiment_queries->List(caller);
  if (!list.ok()) return SendStatus(res, list.status());
  nlohmann::json out = nlohmann::json::array();
  for (const ExperimentRecord& e : *list) out.push_back(ExperimentSummaryJson(e));
  SendJson(res, 200, {{"experiments", std::move(out)}});
}

void SubmitExperiment(const Services& s, const Request& req, Response& res, const Caller& caller) {
  if (req.body.empty()) {
    return SendError(res, 400, "the request body must be an experiment manifest (YAML or JSON)",
                     nlohmann::json::array({{{"field", "(document)"}, {"problem", "is empty"}}}));
  }
  if (caller.admin) {
    return SendError(res, 403,
                     "the admin token manages tenants and cannot own experiments; submit with a "
                     "tenant token (`weft token create TENANT`)");
  }
  std::vector<FieldError> errors;
  auto e = s.experiments->Submit(req.body, caller.tenant, &errors);
  if (!e.ok()) return SendRefusal(res, e.status(), errors);
  res.set_header("Location", absl::StrCat("/v1/experiments/", e->id));
  SendJson(res, 201, ExperimentSummaryJson(*e));
}

void ShowExperiment(const Services& s, const Request& req, Response& res, const Caller& caller) {
  const std::string id = req.matches[1];
  auto view = s.experiment_queries->Show(caller, id);
  if (absl::IsNotFound(view.status())) return SendNoSuchExperiment(res, id);
  if (!view.ok()) return SendStatus(res, view.status());
  SendJson(res, 200, ExperimentDetailJson(*view));
}

// A person's action on experiment `id`: `act(experiments, id)`, then its summary (nothing
// after a delete).
using ExperimentAction = absl::Status (*)(ExperimentController&, const std::string&);

Handler Action(const Services& s, ExperimentAction act, bool answer_summary = true) {
  return [&s, act, answer_summary](const Request& req, Response& res, const Caller& caller) {
    const std::string id = req.matches[1];
    auto found = s.experiment_queries->Find(caller, id);
    if (absl::IsNotFound(found.status())) return SendNoSuchExperiment(res, id);
    if (!found.ok()) return SendStatus(res, found.status());
    if (absl::Status st = act(*s.experiments, id); !st.ok()) return SendStatus(res, st);
    if (!answer_summary) return SendJson(res, 200, {{"id", id}, {"deleted", true}});
    auto after = s.experiment_queries->Find(caller, id);
    if (!after.ok()) return SendStatus(res, after.status());
    SendJson(res, 200, ExperimentSummaryJson(*after));
  };
}

}  // namespace

void AddExperimentRoutes(Router& r, const Services& s) {
  r.Route("/v1/experiments",
          {{"GET", Bind(s, ListExperiments)}, {"POST", Bind(s, SubmitExperiment)}});
  r.Route(R"(/v1/experiments/([^/]+))",
          {{"GET", Bind(s, ShowExperiment)},
           {"DELETE",
            Action(
                s, [](ExperimentController& e, const std::string& id) { return e.Delete(id); },
                /*answer_summary=*/false)}});
  r.Route(R"(/v1/experiments/([^/]+)/halt)",
          {{"POST",
            Action(s, [](ExperimentController& e, const std::string& id) { return e.Halt(id); })}});
  r.Route(R"(/v1/experiments/([^/]+)/resume)",
          {{"POST", Action(s, [](ExperimentController& e, const std::string& id) {
              return e.Resume(id);
            })}});
}

}  // namespace weft::api
