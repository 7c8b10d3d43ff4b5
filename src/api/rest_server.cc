#include "api/rest_server.h"

#include <httplib.h>

#include <fstream>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/job_json.h"
#include "common/files.h"
#include "common/logging.h"

namespace weft::api {
namespace {

using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;
constexpr char kTenant[] = "default";  // until authentication lands, every caller is `default`

void SendJson(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(body.dump(2) + "\n", "application/json");
}

void SendError(httplib::Response& res, int status, const std::string& message,
               nlohmann::json details = nullptr) {
  static const std::map<int, std::string> kCodes = {
      {400, "bad_request"}, {404, "not_found"}, {405, "method_not_allowed"},
      {409, "conflict"},    {500, "internal"},  {503, "unavailable"}};
  nlohmann::json err = {{"code", kCodes.count(status) ? kCodes.at(status) : "error"},
                        {"message", message}};
  if (!details.is_null()) err["details"] = details;
  SendJson(res, status, {{"error", err}});
}

// Maps a Status from the controller or store to an HTTP error.
void SendStatus(httplib::Response& res, const absl::Status& s) {
  int code = 500;
  if (absl::IsNotFound(s)) code = 404;
  if (absl::IsInvalidArgument(s)) code = 400;
  if (absl::IsFailedPrecondition(s) || absl::IsAlreadyExists(s)) code = 409;
  if (absl::IsUnavailable(s)) code = 503;
  SendError(res, code, std::string(s.message()));
}

void JobNotFound(httplib::Response& res, const std::string& id) {
  SendError(res, 404, absl::StrCat("no job '", id, "'; `weft list` shows your jobs"));
}

// Registers `pattern` for the given methods and answers every other method with 405.
class Router {
 public:
  explicit Router(httplib::Server& s) : s_(s) {}
  void Route(const std::string& pattern, std::map<std::string, Handler> methods) {
    std::set<std::string> allowed;
    for (const auto& [m, h] : methods) allowed.insert(m);
    std::string allow = absl::StrJoin(allowed, ", ");
    auto pick = [methods, allow](const std::string& method) -> Handler {
      auto it = methods.find(method);
      if (it != methods.end()) return it->second;
      return [method, allow](const httplib::Request& req, httplib::Response& res) {
        res.set_header("Allow", allow);
        SendError(res, 405, absl::StrCat(method, " is not allowed on ", req.path,
                                         "; allowed: ", allow));
      };
    };
    s_.Get(pattern, pick("GET"));
    s_.Post(pattern, pick("POST"));
    s_.Put(pattern, pick("PUT"));
    s_.Patch(pattern, pick("PATCH"));
    s_.Delete(pattern, pick("DELETE"));
  }

 private:
  httplib::Server& s_;
};

// The job if it exists and belongs to the caller's tenant; otherwise answers 404.
std::optional<JobRecord> FindJob(Store& store, const std::string& id, httplib::Response& res) {
  auto job = store.GetJob(id);
  if (!job.ok() || job->tenant != kTenant) {
    if (job.ok() || absl::IsNotFound(job.status())) {
      JobNotFound(res, id);
    } else {
      SendStatus(res, job.status());
    }
    return std::nullopt;
  }
  return *job;
}

}  // namespace

RestServer::RestServer(Store& store, Controller& controller)
    : store_(store), controller_(controller), server_(std::make_unique<httplib::Server>()) {
  server_->new_task_queue = [] { return new httplib::ThreadPool(32); };
  Routes();
}

RestServer::~RestServer() { Stop(); }

absl::Status RestServer::Start(const std::string& host, int port) {
  if (!server_->bind_to_port(host.c_str(), port)) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", host, ":", port, " (in use? try --listen with another port)"));
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  return absl::OkStatus();
}

void RestServer::Stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

void RestServer::Routes() {
  httplib::Server& s = *server_;
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404) {
      SendError(res, 404, absl::StrCat("no route ", req.method, " ", req.path,
                                       "; see docs/openapi.yaml"));
    } else {
      SendError(res, res.status, "request failed");
    }
  });
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res,
                             std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    SendError(res, 500, absl::StrCat("internal error: ", what));
  });

  Router r(s);
  r.Route("/healthz", {{"GET", [](const httplib::Request&, httplib::Response& res) {
                          SendJson(res, 200, {{"status", "ok"}});
                        }}});

  r.Route("/v1/jobs",
          {{"GET",
            [this](const httplib::Request&, httplib::Response& res) {
              auto jobs = store_.ListJobs(kTenant);
              if (!jobs.ok()) return SendStatus(res, jobs.status());
              nlohmann::json list = nlohmann::json::array();
              for (const auto& j : *jobs) {
                nlohmann::json v = JobSummaryJson(j);
                std::string w = controller_.WaitingReason(j.id);
                if (!w.empty()) v["waiting_reason"] = w;
                list.push_back(v);
              }
              SendJson(res, 200, {{"jobs", list}});
            }},
           {"POST", [this](const httplib::Request& req, httplib::Response& res) {
              if (req.body.empty()) {
                return SendError(res, 400, "the request body must be a job manifest (YAML or JSON)",
                                 nlohmann::json::array({{{"field", "(document)"},
                                                         {"problem", "is empty"}}}));
              }
              std::vector<FieldError> errors;
              auto job = controller_.Submit(req.body, kTenant, &errors);
              if (!job.ok()) {
                if (!errors.empty()) {
                  nlohmann::json details = nlohmann::json::array();
                  for (const auto& e : errors) {
                    details.push_back({{"field", e.field}, {"problem", e.problem}});
                  }
                  return SendError(res, 400, std::string(job.status().message()), details);
                }
                return SendStatus(res, job.status());
              }
              res.set_header("Location", absl::StrCat("/v1/jobs/", job->id));
              SendJson(res, 201, JobSummaryJson(*job));
            }}});

  r.Route(R"(/v1/jobs/([^/]+))",
          {{"GET",
            [this](const httplib::Request& req, httplib::Response& res) {
              std::string id = req.matches[1];
              auto job = FindJob(store_, id, res);
              if (!job) return;
              auto history = store_.History(id);
              auto metrics = store_.Metrics(id, 200);
              auto artifacts = store_.Artifacts(id);
              if (!history.ok()) return SendStatus(res, history.status());
              if (!metrics.ok()) return SendStatus(res, metrics.status());
              if (!artifacts.ok()) return SendStatus(res, artifacts.status());
              SendJson(res, 200, JobDetailJson(*job, *history, *metrics, *artifacts,
                                               controller_.WaitingReason(id)));
            }},
           {"DELETE", [this](const httplib::Request& req, httplib::Response& res) {
              std::string id = req.matches[1];
              if (!FindJob(store_, id, res)) return;
              absl::Status st = controller_.Delete(id);
              if (!st.ok()) return SendStatus(res, st);
              SendJson(res, 200, {{"id", id}, {"deleted", true}});
            }}});

  auto action = [this](const std::string& verb) {
    return [this, verb](const httplib::Request& req, httplib::Response& res) {
      std::string id = req.matches[1];
      if (!FindJob(store_, id, res)) return;
      absl::Status st = verb == "halt" ? controller_.Halt(id) : controller_.Resume(id);
      if (!st.ok()) return SendStatus(res, st);
      auto job = store_.GetJob(id);
      if (!job.ok()) return SendStatus(res, job.status());
      SendJson(res, 200, JobSummaryJson(*job));
    };
  };
  r.Route(R"(/v1/jobs/([^/]+)/halt)", {{"POST", action("halt")}});
  r.Route(R"(/v1/jobs/([^/]+)/resume)", {{"POST", action("resume")}});

  r.Route(R"(/v1/jobs/([^/]+)/metrics)",
          {{"GET", [this](const httplib::Request& req, httplib::Response& res) {
              std::string id = req.matches[1];
              if (!FindJob(store_, id, res)) return;
              int64_t limit = 0;
              if (req.has_param("limit")) {
                try {
                  limit = std::stoll(req.get_param_value("limit"));
                } catch (...) {
                  return SendError(res, 400, "limit must be an integer");
                }
              }
              auto metrics = store_.Metrics(id, limit);
              if (!metrics.ok()) return SendStatus(res, metrics.status());
              nlohmann::json points = nlohmann::json::array();
              for (const auto& m : *metrics) points.push_back(MetricJson(m));
              SendJson(res, 200, {{"job_id", id}, {"points", points}});
            }}});

  r.Route(R"(/v1/jobs/([^/]+)/model)",
          {{"GET", [this](const httplib::Request& req, httplib::Response& res) {
              std::string id = req.matches[1];
              auto job = FindJob(store_, id, res);
              if (!job) return;
              std::string which = req.has_param("which") ? req.get_param_value("which") : "final";
              if (which != "delivered" && which != "final") {
                return SendError(res, 400, absl::StrCat("which must be 'delivered' or 'final', got '",
                                                        which, "'"));
              }
              auto artifacts = store_.Artifacts(id);
              if (!artifacts.ok()) return SendStatus(res, artifacts.status());
              for (const auto& a : *artifacts) {
                if (a.kind != which) continue;
                auto bytes = ReadFile(a.path);
                if (!bytes.ok()) return SendStatus(res, bytes.status());
                res.set_header("Content-Disposition",
                               absl::StrCat("attachment; filename=\"", id, "-", which, ".pt\""));
                res.set_header("X-Weft-Test-Accuracy", absl::StrCat(a.test_accuracy));
                res.set_content(*bytes, "application/octet-stream");
                return;
              }
              SendError(res, 404,
                        absl::StrCat("job ", id, " has no ", which, " model yet (state ",
                                     JobStateName(job->state), ")",
                                     which == "delivered" ? "; it appears when targets.deliver is met"
                                                          : "; it appears when the job completes"));
            }}});

  r.Route(R"(/v1/jobs/([^/]+)/logs)",
          {{"GET", [this](const httplib::Request& req, httplib::Response& res) {
              std::string id = req.matches[1];
              if (!FindJob(store_, id, res)) return;
              std::string path = controller_.LogDir(id) + "/learner-0.log";
              bool follow = req.has_param("follow") && req.get_param_value("follow") == "true";
              if (!follow) {
                auto text = ReadFile(path);
                res.status = 200;
                res.set_content(text.ok() ? *text : std::string(), "text/plain");
                return;
              }
              auto offset = std::make_shared<std::streamoff>(0);
              res.set_chunked_content_provider(
                  "text/plain", [this, id, path, offset](size_t, httplib::DataSink& sink) {
                    std::ifstream in(path, std::ios::binary);
                    std::string chunk;
                    if (in) {
                      in.seekg(*offset);
                      chunk.assign(std::istreambuf_iterator<char>(in), {});
                    }
                    if (!chunk.empty()) {
                      *offset += static_cast<std::streamoff>(chunk.size());
                      return sink.write(chunk.data(), chunk.size());
                    }
                    auto job = store_.GetJob(id);
                    bool ended = !job.ok() || IsTerminal(job->state) ||
                                 job->state == JobState::kHalted;
                    if (ended) {
                      sink.done();
                      return true;
                    }
                    std::this_thread::sleep_for(std::chrono::milliseconds(300));
                    return sink.is_writable();
                  });
            }}});
}

}  // namespace weft::api
