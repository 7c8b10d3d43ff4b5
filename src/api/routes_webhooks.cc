// /v1/webhooks: a tenant's webhooks (control/webhooks.h). A tenant registers, lists and deletes its
// own; another tenant's is 404 as a missing one is; the admin has none.
#include "absl/strings/str_cat.h"
#include "api/routes.h"
#include "common/text.h"
#include "control/webhooks.h"
#include "job/job_state.h"

namespace weft::api {
namespace {

using Request = httplib::Request;
using Response = httplib::Response;

nlohmann::json WebhookJson(const WebhookRecord& w) {
  return {{"id", w.id},
          {"url", w.url},
          {"events", w.events},
          {"created", FormatTimeMs(w.created_ms)},
          {"last_status", w.last_status},
          {"last_attempt",
           w.last_attempt_ms ? nlohmann::json(FormatTimeMs(*w.last_attempt_ms)) : nullptr},
          {"pending", w.pending}};
}

// Answers 403 for the admin: webhooks tell a tenant about its own jobs.
bool RefuseAdmin(const Caller& caller, Response& res) {
  if (!caller.admin) return false;
  SendError(res, 403, "webhooks belong to tenants; register one with a tenant's token");
  return true;
}

// A registration body {"url", "events": ["DELIVERED", ...]} as a record, collecting problems by
// field.
WebhookRecord ReadWebhookBody(const nlohmann::json& body, const WebhookOptions& options,
                              nlohmann::json* problems) {
  WebhookRecord w;
  auto problem = [problems](const std::string& field, const std::string& what) {
    problems->push_back({{"field", field}, {"problem", what}});
  };
  if (!body.is_object()) {
    problem("(document)", "must be a JSON object {url, events}");
    return w;
  }
  for (const auto& [k, v] : body.items()) {
    if (k == "url") {
      if (!v.is_string()) {
        problem("url", "must be a string");
        continue;
      }
      w.url = v.get<std::string>();
      absl::StatusOr<WebhookUrl> url = ParseWebhookUrl(w.url, options.allowed);
      if (!url.ok()) problem("url", std::string(url.status().message()));
    } else if (k == "events") {
      if (!v.is_array() || v.empty()) {
        problem("events", "must be a non-empty list of job states, e.g. [\"DELIVERED\"]");
        continue;
      }
      for (size_t i = 0; i < v.size(); ++i) {
        const std::string field = absl::StrCat("events[", i, "]");
        if (!v[i].is_string() || !ParseJobState(v[i].get<std::string>())) {
          problem(field,
                  "must be a job state: QUEUED, PLACED, STARTING, RUNNING, DELIVERED, "
                  "COMPLETED, FAILED, HALTED, PREEMPTED or RESUMING");
        } else if (std::find(w.events.begin(), w.events.end(), v[i]) != w.events.end()) {
          problem(field, "is listed twice");
        } else {
          w.events.push_back(v[i].get<std::string>());
        }
      }
    } else {
      problem(FieldName(k), "unknown field; expected url, events");
    }
  }
  if (!body.contains("url")) problem("url", "is required");
  if (!body.contains("events"))
    problem("events", "is required, e.g. [\"DELIVERED\", \"COMPLETED\"]");
  return w;
}

void Create(const Services& s, const Request& req, Response& res, const Caller& caller) {
  if (RefuseAdmin(caller, res)) return;
  nlohmann::json problems = nlohmann::json::array();
  WebhookRecord w = ReadWebhookBody(nlohmann::json::parse(req.body, nullptr, false),
                                    s.webhooks->options(), &problems);
  if (!problems.empty()) return SendError(res, 400, "invalid webhook", problems);
  absl::StatusOr<WebhookRecord> created = s.webhooks->Register(caller.tenant, w.url, w.events);
  if (!created.ok()) return SendStatus(res, created.status());
  nlohmann::json body = WebhookJson(*created);
  body["secret"] = created->secret;
  body["signature"] =
      "each delivery carries X-Weft-Signature: sha256=<hex HMAC-SHA256 of the body under this "
      "secret>; weft shows the secret only now";
  res.set_header("Location", absl::StrCat("/v1/webhooks/", created->id));
  SendJson(res, 201, body);
}

void List(const Services& s, const Request&, Response& res, const Caller& caller) {
  if (RefuseAdmin(caller, res)) return;
  auto all = s.webhooks->List(caller.tenant);
  if (!all.ok()) return SendStatus(res, all.status());
  nlohmann::json list = nlohmann::json::array();
  for (const WebhookRecord& w : *all) list.push_back(WebhookJson(w));
  SendJson(res, 200, {{"webhooks", list}});
}

void Delete(const Services& s, const Request& req, Response& res, const Caller& caller) {
  if (RefuseAdmin(caller, res)) return;
  const std::string id = req.matches[1];
  if (absl::Status st = s.webhooks->Delete(caller.tenant, id); !st.ok()) {
    return SendStatus(res, st);
  }
  SendJson(res, 200, {{"id", id}, {"deleted", true}});
}

}  // namespace

void AddWebhookRoutes(Router& r, const Services& s) {
  r.Route("/v1/webhooks", {{"GET", Bind(s, List)}, {"POST", Bind(s, Create)}});
  r.Route(R"(/v1/webhooks/([^/]+))", {{"DELETE", Bind(s, Delete)}});
}

}  // namespace weft::api
