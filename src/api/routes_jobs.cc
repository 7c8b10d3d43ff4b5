// /v1/jobs and everything under one job: submit, list, show, halt, resume, delete, metrics,
// models, logs and the data audit. A tenant sees only its own jobs; another tenant's answers 404.
#include <algorithm>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "api/job_json.h"
#include "api/routes.h"
#include "common/files.h"
#include "job/audit.h"
#include "job/layout.h"

namespace weft::api {
namespace {

using Request = httplib::Request;
using Response = httplib::Response;

// ?limit=N (1..kMaxListJobs, default kDefaultListJobs) and ?after=ID: one page of the caller's
// jobs in creation order; "next" names the job to continue after when there are more.
constexpr int64_t kDefaultListJobs = 500;
constexpr int64_t kMaxListJobs = 1000;

void ListJobs(const Services& s, const Request& req, Response& res, const Caller& caller) {
  JobPage page{req.get_param_value("after"), kDefaultListJobs};
  if (req.has_param("limit") && (!absl::SimpleAtoi(req.get_param_value("limit"), &page.limit) ||
                                 page.limit < 1 || page.limit > kMaxListJobs)) {
    const std::string problem = absl::StrCat("must be an integer in [1, ", kMaxListJobs, "]");
    return SendError(res, 400, "limit " + problem,
                     nlohmann::json::array({{{"field", "limit"}, {"problem", problem}}}));
  }
  if (!page.after.empty() && !FindJob(s.jobs, page.after, caller, res)) return;
  ++page.limit;  // one more than asked: whether there is a next page
  auto jobs = s.jobs.List(caller, page);
  if (!jobs.ok()) return SendStatus(res, jobs.status());
  nlohmann::json list = nlohmann::json::array();
  nlohmann::json body;
  for (const auto& j : *jobs) {
    if (static_cast<int64_t>(list.size()) == page.limit - 1) {
      body["next"] = list.back()["id"];
      break;
    }
    list.push_back(JobSummaryJson(j, s.controller.view().WaitingFor(j.id), s.clock.NowMs()));
  }
  body["jobs"] = std::move(list);
  SendJson(res, 200, body);
}

void SubmitJob(const Services& s, const Request& req, Response& res, const Caller& caller) {
  if (req.body.empty()) {
    return SendError(res, 400, "the request body must be a job manifest (YAML or JSON)",
                     nlohmann::json::array({{{"field", "(document)"}, {"problem", "is empty"}}}));
  }
  if (caller.admin) {
    return SendError(res, 403,
                     "the admin token manages tenants and cannot own jobs; submit with a tenant "
                     "token (`weft token create TENANT`)");
  }
  std::vector<FieldError> errors;
  auto job = s.controller.Submit(req.body, caller.tenant, &errors);
  if (!job.ok()) return SendRefusal(res, job.status(), errors);
  res.set_header("Location", absl::StrCat("/v1/jobs/", job->id));
  SendJson(res, 201, JobSummaryJson(*job, std::nullopt, s.clock.NowMs()));
}

void ShowJob(const Services& s, const Request& req, Response& res, const Caller& caller) {
  std::string id = req.matches[1];
  // One read of the store for the job and its rows (the status read is the API's hottest call).
  auto read = s.jobs.Snapshot(caller, id, /*metrics_limit=*/200);
  if (!read.ok()) {
    if (absl::IsNotFound(read.status())) return SendNoSuchJob(res, id);
    return SendStatus(res, read.status());
  }
  auto spec = s.controller.Spec(read->job);
  if (!spec.ok()) return SendStatus(res, spec.status());
  SendJson(res, 200,
           JobDetailJson({read->job, **spec, read->history, read->metrics, read->models,
                          s.controller.view().WaitingFor(id), s.clock.NowMs()}));
}

void DeleteJob(const Services& s, const Request& req, Response& res, const Caller& caller) {
  std::string id = req.matches[1];
  if (!FindJob(s.jobs, id, caller, res)) return;
  if (absl::Status st = s.controller.Delete(id); !st.ok()) return SendStatus(res, st);
  SendJson(res, 200, {{"id", id}, {"deleted", true}});
}

// A user's action on job `id`: `act(controller, id)`.
using JobAction = absl::Status (*)(Controller&, const std::string&);

Handler Action(const Services& s, JobAction act) {
  return [&s, act](const Request& req, Response& res, const Caller& caller) {
    std::string id = req.matches[1];
    if (!FindJob(s.jobs, id, caller, res)) return;
    if (absl::Status st = act(s.controller, id); !st.ok()) return SendStatus(res, st);
    auto job = s.jobs.Find(caller, id);
    if (!job.ok()) return SendStatus(res, job.status());
    SendJson(res, 200, JobSummaryJson(*job, s.controller.view().WaitingFor(id), s.clock.NowMs()));
  };
}

constexpr int64_t kMetricPageDefault = 1000;
constexpr int64_t kMetricPageMax = 10000;

void Metrics(const Services& s, const Request& req, Response& res, const Caller& caller) {
  std::string id = req.matches[1];
  if (!FindJob(s.jobs, id, caller, res)) return;
  // A page of the series: ?from=K (0-based; default the last page) &limit=N (default 1,000).
  int64_t limit = kMetricPageDefault, from = -1;
  if (req.has_param("limit") && (!absl::SimpleAtoi(req.get_param_value("limit"), &limit) ||
                                 limit < 1 || limit > kMetricPageMax)) {
    return SendError(res, 400,
                     absl::StrCat("limit must be an integer in [1, ", kMetricPageMax, "]"),
                     nlohmann::json::array({{{"field", "limit"}, {"problem", "out of range"}}}));
  }
  if (req.has_param("from") &&
      (!absl::SimpleAtoi(req.get_param_value("from"), &from) || from < 0)) {
    return SendError(res, 400, "from must be a non-negative integer (a point's index)",
                     nlohmann::json::array(
                         {{{"field", "from"}, {"problem", "must be a non-negative integer"}}}));
  }
  auto page = s.jobs.Metrics(caller, id, from, limit);
  if (!page.ok()) return SendStatus(res, page.status());
  nlohmann::json points = nlohmann::json::array();
  for (const auto& m : page->points) points.push_back(MetricJson(m));
  nlohmann::json body = {
      {"job_id", id}, {"total", page->total}, {"from", page->from}, {"points", points}};
  const int64_t end = page->from + static_cast<int64_t>(page->points.size());
  if (end < page->total) body["next"] = end;
  SendJson(res, 200, body);
}

void Model(const Services& s, const Request& req, Response& res, const Caller& caller) {
  std::string id = req.matches[1];
  auto job = FindJob(s.jobs, id, caller, res);
  if (!job) return;
  std::string which = req.has_param("which") ? req.get_param_value("which") : kFinalModel;
  if (!IsModelKind(which)) {
    return SendError(res, 400,
                     absl::StrCat("which must be 'delivered' or 'final', got '", which, "'"));
  }
  auto models = s.jobs.Models(caller, id);
  if (!models.ok()) return SendStatus(res, models.status());
  for (const auto& a : *models) {
    if (a.kind != which) continue;
    absl::Status sent = SendFile(res, ModelPath(s.controller.layout().ResultDir(id), a.kind),
                                 "application/octet-stream");
    if (!sent.ok()) return SendStatus(res, sent);
    res.set_header("Content-Disposition",
                   absl::StrCat("attachment; filename=\"", id, "-", which, ".pt\""));
    res.set_header("X-Weft-Test-Accuracy", absl::StrCat(a.test_accuracy));
    return;
  }
  SendError(res, 404,
            absl::StrCat("job ", id, " has no ", which, " model yet (state ",
                         JobStateName(job->state), ")",
                         which == kDeliveredModel ? "; it appears when targets.deliver is met"
                                                  : "; it appears when the job completes"));
}

// Streams the log from the start until the job settles, polling the file every 300 ms.
void FollowLog(const Services& s, const std::string& id, const std::string& path,
               const Caller& caller, Response& res) {
  // The lease lives in the content provider: released when the job settles, or when the server
  // drops the provider because the client went away.
  std::shared_ptr<StreamLimiter::Lease> lease;
  if (!AcquireStream(s, caller, res, &lease)) return;
  // Where the stream is in the file, and its place among the tenant's streams.
  struct Follow {
    int64_t offset = 0;
    std::shared_ptr<StreamLimiter::Lease> lease;
  };
  auto follow = std::make_shared<Follow>(Follow{0, std::move(lease)});
  const JobQueries* jobs = &s.jobs;
  auto provider = [jobs, caller, id, path, follow](size_t, httplib::DataSink& sink) {
    // At most kFileChunkBytes per call: a long log is never read whole into memory.
    std::string chunk = ReadFileChunk(path, follow->offset);
    if (!chunk.empty()) {
      follow->offset += static_cast<int64_t>(chunk.size());
      return sink.write(chunk.data(), chunk.size());
    }
    auto job = jobs->Find(caller, id);
    if (!job.ok() || IsSettled(job->state)) {
      // The place comes back before the client sees the end, so a stream opened right after
      // this one ends is never refused for it.
      follow->lease.reset();
      sink.done();
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return sink.is_writable();
  };
  // Not text/plain: httplib gzips text/* for a client that accepts it (every browser), and its
  // compressor holds small chunks back, so a followed log would arrive in bursts or not at all.
  // Types it does not compress stream as written.
  res.set_chunked_content_provider("application/octet-stream", std::move(provider));
}

// The log at `path` of job `id`, whole or (?follow=true) followed until the job ends.
void SendLog(const Services& s, const Request& req, Response& res, const Caller& caller,
             const std::string& id, const std::string& path) {
  if (req.has_param("follow") && req.get_param_value("follow") == "true") {
    return FollowLog(s, id, path, caller, res);
  }
  absl::Status sent = SendFile(res, path, "text/plain");
  if (absl::IsNotFound(sent)) {  // the process has written nothing yet
    res.status = 200;
    return res.set_content("", "text/plain");
  }
  if (!sent.ok()) SendStatus(res, sent);
}

void Logs(const Services& s, const Request& req, Response& res, const Caller& caller) {
  std::string id = req.matches[1];
  auto job = FindJob(s.jobs, id, caller, res);
  if (!job) return;
  // One log per learner: ?rank=N (default 0), the learner's id (its rank as started; an elastic
  // job's newcomers get ids past its maximum world size); or ?server=I, a scale-out
  // parameter-server job's weft-ps server I.
  if (req.has_param("server")) {
    auto spec = s.controller.Spec(*job);
    const int servers = spec.ok() ? (*spec)->ParameterServers() : 0;
    int server = 0;
    if (servers == 0) {
      return SendError(res, 400,
                       "server: the job has no weft-ps servers (training.ps.servers > 1 has)");
    }
    if (!absl::SimpleAtoi(req.get_param_value("server"), &server) || server < 0 ||
        server >= servers) {
      return SendError(res, 400, absl::StrCat("server must be an integer in [0, ", servers, ")"));
    }
    return SendLog(s, req, res, caller, id,
                   ParameterServerLogPath(s.controller.layout().LogDir(id), server));
  }
  int rank = 0;
  if (req.has_param("rank")) {
    auto spec = s.controller.Spec(*job);
    const int world = std::max(spec.ok() ? (*spec)->resources.learners : 1, job->next_learner_id);
    if (!absl::SimpleAtoi(req.get_param_value("rank"), &rank) || rank < 0 || rank >= world) {
      return SendError(res, 400,
                       absl::StrCat("rank must be an integer in [0, ", world, "): the job has ",
                                    world, " learner(s)"));
    }
  }
  SendLog(s, req, res, caller, id, s.controller.layout().LogPath(id, rank));
}

// The job's data audit checked (job/audit.h): per epoch, how many samples applied steps trained
// once, never, or more than once. 404 when the job ran without the audit.
void Audit(const Services& s, const Request& req, Response& res, const Caller& caller) {
  std::string id = req.matches[1];
  if (!FindJob(s.jobs, id, caller, res)) return;
  absl::StatusOr<AuditReport> r = CheckAuditFile(AuditPath(s.controller.layout().LogDir(id)));
  if (absl::IsNotFound(r.status())) {
    return SendError(res, 404,
                     absl::StrCat("job ", id, " has no audit: weftd ran it without ", kAuditEnv,
                                  "=1 in its environment"));
  }
  if (!r.ok()) return SendStatus(res, r.status());
  nlohmann::json epochs = nlohmann::json::array();
  for (const AuditEpoch& e : r->epochs) {
    epochs.push_back({{"epoch", e.epoch},
                      {"samples", e.samples},
                      {"once", e.once},
                      {"missing", e.missing},
                      {"twice", e.twice},
                      {"out_of_range", e.out_of_range},
                      {"partial", e.partial},
                      {"exact", e.exact()}});
  }
  SendJson(res, 200,
           {{"job", id},
            {"exact", r->exact()},
            {"steps_applied", r->steps_applied},
            {"steps_rolled_back", r->steps_rolled_back},
            {"torn_records", r->torn_records},
            {"problems", r->problems},
            {"epochs", std::move(epochs)}});
}

}  // namespace

void AddJobRoutes(Router& r, const Services& s) {
  r.Route("/v1/jobs", {{"GET", Bind(s, ListJobs)}, {"POST", Bind(s, SubmitJob)}});
  r.Route(R"(/v1/jobs/([^/]+))", {{"GET", Bind(s, ShowJob)}, {"DELETE", Bind(s, DeleteJob)}});
  r.Route(R"(/v1/jobs/([^/]+)/halt)",
          {{"POST", Action(s, [](Controller& c, const std::string& id) { return c.Halt(id); })}});
  r.Route(R"(/v1/jobs/([^/]+)/resume)",
          {{"POST", Action(s, [](Controller& c, const std::string& id) { return c.Resume(id); })}});
  r.Route(R"(/v1/jobs/([^/]+)/metrics)", {{"GET", Bind(s, Metrics)}});
  r.Route(R"(/v1/jobs/([^/]+)/model)", {{"GET", Bind(s, Model)}});
  r.Route(R"(/v1/jobs/([^/]+)/logs)", {{"GET", Bind(s, Logs)}});
  r.Route(R"(/v1/jobs/([^/]+)/audit)", {{"GET", Bind(s, Audit)}});
}

}  // namespace weft::api
