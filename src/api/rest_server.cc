#include "api/rest_server.h"

#include <httplib.h>

#include <fstream>
#include <regex>
#include <map>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/auth.h"
#include "api/job_json.h"
#include "common/files.h"
#include "common/logging.h"
#include "job/job_spec.h"

namespace weft::api {
namespace {

using Handler = std::function<void(const httplib::Request&, httplib::Response&, const Caller&)>;
using RawHandler = std::function<void(const httplib::Request&, httplib::Response&)>;

// Who may call a route.
enum class Access {
  kPublic,  // no token (health checks)
  kAnyone,  // any valid token, admin or tenant
  kAdmin,   // the admin token only
};

void SendJson(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(body.dump(2) + "\n", "application/json");
}

void SendError(httplib::Response& res, int status, const std::string& message,
               nlohmann::json details = nullptr) {
  static const std::map<int, std::string> kCodes = {
      {400, "bad_request"}, {401, "unauthorized"}, {403, "forbidden"},
      {404, "not_found"},   {405, "method_not_allowed"},
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
  if (absl::IsUnauthenticated(s)) code = 401;
  if (absl::IsPermissionDenied(s)) code = 403;
  SendError(res, code, std::string(s.message()));
}

void JobNotFound(httplib::Response& res, const std::string& id) {
  SendError(res, 404, absl::StrCat("no job '", id, "'; `weft list` shows your jobs"));
}

// Registers `pattern` for the given methods, behind `access`, and answers every other method
// with 405. A missing, invalid or revoked token gets 401; a tenant on an admin route 403.
class Router {
 public:
  Router(httplib::Server& s, Store& store) : s_(s), store_(store) {}
  void Route(const std::string& pattern, std::map<std::string, Handler> methods,
             Access access = Access::kAnyone) {
    std::set<std::string> allowed;
    for (const auto& [m, h] : methods) allowed.insert(m);
    std::string allow = absl::StrJoin(allowed, ", ");
    Store* store = &store_;
    auto pick = [methods, allow, access, store](const std::string& method) -> RawHandler {
      auto it = methods.find(method);
      if (it == methods.end()) {
        return [method, allow](const httplib::Request& req, httplib::Response& res) {
          res.set_header("Allow", allow);
          SendError(res, 405, absl::StrCat(method, " is not allowed on ", req.path,
                                           "; allowed: ", allow));
        };
      }
      Handler h = it->second;
      return [h, access, store](const httplib::Request& req, httplib::Response& res) {
        Caller caller;
        if (access != Access::kPublic) {
          auto c = Authenticate(*store, req.get_header_value("Authorization"));
          if (!c.ok()) {
            if (absl::IsUnauthenticated(c.status())) res.set_header("WWW-Authenticate", "Bearer realm=\"weft\"");
            return SendStatus(res, c.status());
          }
          if (access == Access::kAdmin && !c->admin) {
            return SendError(res, 403, "this route needs the admin token");
          }
          caller = *c;
        }
        h(req, res, caller);
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
  Store& store_;
};

// The job if it exists and the caller may see it (its tenant, or the admin); otherwise answers
// 404 exactly as for a missing job, so no tenant learns that another's job exists.
std::optional<JobRecord> FindJob(Store& store, const std::string& id, const Caller& caller,
                                 httplib::Response& res) {
  auto job = store.GetJob(id);
  if (!job.ok() || (!caller.admin && job->tenant != caller.tenant)) {
    if (job.ok() || absl::IsNotFound(job.status())) {
      JobNotFound(res, id);
    } else {
      SendStatus(res, job.status());
    }
    return std::nullopt;
  }
  return *job;
}

nlohmann::json TenantJson(const TenantRecord& t) {
  nlohmann::json j = {{"name", t.name}, {"weight", t.weight}, {"created", FormatTimeMs(t.created_ms)}};
  j["quota"] = t.has_quota ? nlohmann::json{{"cpus", t.quota_cpus},
                                            {"memory_mb", t.quota_memory_mb},
                                            {"gpus", t.quota_gpus}}
                           : nlohmann::json(nullptr);
  return j;
}

nlohmann::json ResourcesJson(const scheduler::Resources& r) {
  return {{"cpus", r.cpus}, {"memory_mb", r.memory_mb}, {"gpus", r.gpus}};
}

// Applies a tenant body ({"name", "quota": {"cpus", "memory_mb", "gpus"} | null, "weight"}) to
// `t`, collecting problems by field. `creating` requires the name.
void ReadTenantBody(const nlohmann::json& body, bool creating, TenantRecord* t,
                    nlohmann::json* problems) {
  auto problem = [&](const std::string& field, const std::string& what) {
    problems->push_back({{"field", field}, {"problem", what}});
  };
  if (!body.is_object()) return problem("(document)", "must be a JSON object");
  for (const auto& [k, v] : body.items()) {
    if (k != "name" && k != "quota" && k != "weight") problem(k, "unknown field; expected name, quota, weight");
  }
  if (creating) {
    static const std::regex kName("[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?");
    if (!body.contains("name") || !body["name"].is_string() ||
        !std::regex_match(body["name"].get<std::string>(), kName)) {
      problem("name", "is required: lower-case letters, digits and '-', at most 40 characters");
    } else {
      t->name = body["name"];
    }
  }
  if (body.contains("weight")) {
    if (!body["weight"].is_number() || body["weight"].get<double>() <= 0) {
      problem("weight", "must be a positive number");
    } else {
      t->weight = body["weight"];
    }
  }
  if (body.contains("quota")) {
    const auto& q = body["quota"];
    if (q.is_null()) {
      t->has_quota = false;
    } else if (!q.is_object()) {
      problem("quota", "must be an object {cpus, memory_mb, gpus} or null");
    } else {
      t->has_quota = true;
      for (const auto& [k, v] : q.items()) {
        if (k == "cpus" && v.is_number() && v.get<double>() >= 0) {
          t->quota_cpus = v;
        } else if (k == "memory_mb" && v.is_number_integer() && v.get<int64_t>() >= 0) {
          t->quota_memory_mb = v;
        } else if (k == "gpus" && v.is_number_integer() && v.get<int64_t>() >= 0) {
          t->quota_gpus = v;
        } else if (k == "cpus" || k == "memory_mb" || k == "gpus") {
          problem("quota." + k, k == "cpus" ? "must be a non-negative number" : "must be a non-negative integer");
        } else {
          problem("quota." + k, "unknown field; expected cpus, memory_mb, gpus");
        }
      }
    }
  }
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

  Router r(s, store_);
  r.Route("/healthz", {{"GET", [](const httplib::Request&, httplib::Response& res, const Caller&) {
                          SendJson(res, 200, {{"status", "ok"}});
                        }}},
          Access::kPublic);

  r.Route("/v1/jobs",
          {{"GET",
            [this](const httplib::Request&, httplib::Response& res, const Caller& caller) {
              auto jobs = store_.ListJobs(caller.admin ? "" : caller.tenant);
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
           {"POST", [this](const httplib::Request& req, httplib::Response& res, const Caller& caller) {
              if (req.body.empty()) {
                return SendError(res, 400, "the request body must be a job manifest (YAML or JSON)",
                                 nlohmann::json::array({{{"field", "(document)"},
                                                         {"problem", "is empty"}}}));
              }
              if (caller.admin) {
                return SendError(res, 403, "the admin token manages tenants and cannot own jobs; "
                                           "submit with a tenant token (`weft token create TENANT`)");
              }
              std::vector<FieldError> errors;
              auto job = controller_.Submit(req.body, caller.tenant, &errors);
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
            [this](const httplib::Request& req, httplib::Response& res, const Caller& caller) {
              std::string id = req.matches[1];
              auto job = FindJob(store_, id, caller, res);
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
           {"DELETE", [this](const httplib::Request& req, httplib::Response& res, const Caller& caller) {
              std::string id = req.matches[1];
              if (!FindJob(store_, id, caller, res)) return;
              absl::Status st = controller_.Delete(id);
              if (!st.ok()) return SendStatus(res, st);
              SendJson(res, 200, {{"id", id}, {"deleted", true}});
            }}});

  auto action = [this](const std::string& verb) {
    return [this, verb](const httplib::Request& req, httplib::Response& res, const Caller& caller) {
      std::string id = req.matches[1];
      if (!FindJob(store_, id, caller, res)) return;
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
          {{"GET", [this](const httplib::Request& req, httplib::Response& res, const Caller& caller) {
              std::string id = req.matches[1];
              if (!FindJob(store_, id, caller, res)) return;
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
          {{"GET", [this](const httplib::Request& req, httplib::Response& res, const Caller& caller) {
              std::string id = req.matches[1];
              auto job = FindJob(store_, id, caller, res);
              if (!job) return;
              std::string which = req.has_param("which") ? req.get_param_value("which") : "final";
              if (!IsModelKind(which)) {
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
                                     which == kDeliveredModel ? "; it appears when targets.deliver is met"
                                                          : "; it appears when the job completes"));
            }}});

  r.Route(R"(/v1/jobs/([^/]+)/logs)",
          {{"GET", [this](const httplib::Request& req, httplib::Response& res, const Caller& caller) {
              std::string id = req.matches[1];
              auto job = FindJob(store_, id, caller, res);
              if (!job) return;
              // One log per learner: ?rank=N (default 0) of the job's `resources.learners`.
              int rank = 0;
              if (req.has_param("rank")) {
                auto spec = ParseManifest(job->spec_json);
                const int world = spec.ok() ? spec->resources.learners : 1;
                if (!absl::SimpleAtoi(req.get_param_value("rank"), &rank) || rank < 0 ||
                    rank >= world) {
                  return SendError(res, 400,
                                   absl::StrCat("rank must be an integer in [0, ", world,
                                                "): the job has ", world, " learner(s)"));
                }
              }
              std::string path = controller_.layout().LogPath(id, rank);
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
                    if (!job.ok() || IsSettled(job->state)) {
                      sink.done();
                      return true;
                    }
                    std::this_thread::sleep_for(std::chrono::milliseconds(300));
                    return sink.is_writable();
                  });
            }}});

  // --- Tenants and tokens (admin) ---
  r.Route("/v1/tenants",
          {{"GET",
            [this](const httplib::Request&, httplib::Response& res, const Caller&) {
              auto usage = controller_.Usage();
              if (!usage.ok()) return SendStatus(res, usage.status());
              nlohmann::json list = nlohmann::json::array();
              for (const auto& u : *usage) {
                nlohmann::json t = TenantJson(u.tenant);
                t["usage"] = {{"used", ResourcesJson(u.used)},
                              {"running_jobs", u.running_jobs},
                              {"queued_jobs", u.queued_jobs},
                              {"dominant_share", u.dominant_share},
                              {"fair_share", u.fair_share}};
                list.push_back(t);
              }
              SendJson(res, 200, {{"tenants", list}});
            }},
           {"POST", [this](const httplib::Request& req, httplib::Response& res, const Caller&) {
              nlohmann::json body = nlohmann::json::parse(req.body, nullptr, false);
              TenantRecord t;
              t.created_ms = SystemClock::Get().NowMs();
              nlohmann::json problems = nlohmann::json::array();
              ReadTenantBody(body, /*creating=*/true, &t, &problems);
              if (!problems.empty()) return SendError(res, 400, "invalid tenant", problems);
              if (absl::Status s = store_.CreateTenant(t); !s.ok()) return SendStatus(res, s);
              res.set_header("Location", absl::StrCat("/v1/tenants/", t.name));
              SendJson(res, 201, TenantJson(t));
            }}},
          Access::kAdmin);

  r.Route(R"(/v1/tenants/([^/]+))",
          {{"GET",
            [this](const httplib::Request& req, httplib::Response& res, const Caller&) {
              auto t = store_.GetTenant(req.matches[1]);
              if (!t.ok()) return SendStatus(res, t.status());
              SendJson(res, 200, TenantJson(*t));
            }},
           {"PATCH",
            [this](const httplib::Request& req, httplib::Response& res, const Caller&) {
              auto t = store_.GetTenant(req.matches[1]);
              if (!t.ok()) return SendStatus(res, t.status());
              nlohmann::json body = nlohmann::json::parse(req.body, nullptr, false);
              nlohmann::json problems = nlohmann::json::array();
              if (body.is_object() && body.contains("name") && body["name"] != t->name) {
                problems.push_back({{"field", "name"}, {"problem", "cannot be changed"}});
              }
              if (body.is_object()) body.erase("name");
              ReadTenantBody(body, /*creating=*/false, &*t, &problems);
              if (!problems.empty()) return SendError(res, 400, "invalid tenant update", problems);
              if (absl::Status s = store_.UpdateTenant(*t); !s.ok()) return SendStatus(res, s);
              SendJson(res, 200, TenantJson(*t));
            }},
           {"DELETE", [this](const httplib::Request& req, httplib::Response& res, const Caller&) {
              std::string name = req.matches[1];
              if (name == "default") return SendError(res, 409, "tenant 'default' cannot be deleted");
              if (absl::Status s = store_.DeleteTenant(name); !s.ok()) return SendStatus(res, s);
              SendJson(res, 200, {{"name", name}, {"deleted", true}});
            }}},
          Access::kAdmin);

  r.Route(R"(/v1/tenants/([^/]+)/tokens)",
          {{"GET",
            [this](const httplib::Request& req, httplib::Response& res, const Caller&) {
              std::string name = req.matches[1];
              if (auto t = store_.GetTenant(name); !t.ok()) return SendStatus(res, t.status());
              auto tokens = store_.ListTokens(name);
              if (!tokens.ok()) return SendStatus(res, tokens.status());
              nlohmann::json list = nlohmann::json::array();
              for (const auto& t : *tokens) {
                list.push_back({{"id", t.id},
                                {"created", FormatTimeMs(t.created_ms)},
                                {"revoked", t.revoked_ms ? nlohmann::json(FormatTimeMs(*t.revoked_ms))
                                                         : nlohmann::json(nullptr)}});
              }
              SendJson(res, 200, {{"tenant", name}, {"tokens", list}});
            }},
           {"POST", [this](const httplib::Request& req, httplib::Response& res, const Caller&) {
              std::string name = req.matches[1];
              if (auto t = store_.GetTenant(name); !t.ok()) return SendStatus(res, t.status());
              auto issued = IssueToken(store_, name, SystemClock::Get().NowMs());
              if (!issued.ok()) return SendStatus(res, issued.status());
              SendJson(res, 201, {{"id", issued->first.id},
                                  {"tenant", name},
                                  {"token", issued->second},
                                  {"note", "shown only now; weft keeps only its SHA-256"}});
            }}},
          Access::kAdmin);

  r.Route(R"(/v1/tenants/([^/]+)/tokens/([^/]+))",
          {{"DELETE", [this](const httplib::Request& req, httplib::Response& res, const Caller&) {
              absl::Status s = store_.RevokeToken(req.matches[1], req.matches[2], SystemClock::Get().NowMs());
              if (!s.ok()) return SendStatus(res, s);
              SendJson(res, 200, {{"id", req.matches[2]}, {"revoked", true}});
            }}},
          Access::kAdmin);

  // --- The queue and the nodes (a tenant sees its own jobs only) ---
  r.Route("/v1/queue",
          {{"GET", [this](const httplib::Request&, httplib::Response& res, const Caller& caller) {
              auto queue = controller_.Queue(caller.admin ? "" : caller.tenant);
              if (!queue.ok()) return SendStatus(res, queue.status());
              nlohmann::json list = nlohmann::json::array();
              int position = 0;
              for (const auto& e : *queue) {
                list.push_back({{"position", ++position},
                                {"id", e.job.id},
                                {"name", e.job.name},
                                {"tenant", e.job.tenant},
                                {"state", JobStateName(e.job.state)},
                                {"priority", e.priority},
                                {"submitted", FormatTimeMs(e.job.created_ms)},
                                {"reason", e.reason}});
              }
              SendJson(res, 200, {{"queue", list}});
            }}});

  r.Route("/v1/nodes",
          {{"GET", [this](const httplib::Request&, httplib::Response& res, const Caller& caller) {
              auto nodes = controller_.Nodes();
              if (!nodes.ok()) return SendStatus(res, nodes.status());
              nlohmann::json list = nlohmann::json::array();
              for (const auto& u : *nodes) {
                nlohmann::json jobs = nlohmann::json::array();
                int others = 0;
                for (const auto& j : u.jobs) {
                  if (caller.admin || j.tenant == caller.tenant) {
                    jobs.push_back({{"id", j.id}, {"tenant", j.tenant}, {"state", JobStateName(j.state)}});
                  } else {
                    ++others;
                  }
                }
                list.push_back({{"name", u.node.name},
                                {"capacity", ResourcesJson(u.node.capacity)},
                                {"allocated", ResourcesJson(u.node.allocated)},
                                {"jobs", jobs},
                                {"other_tenants_jobs", others}});
              }
              SendJson(res, 200, {{"nodes", list}});
            }}});
}

}  // namespace weft::api
