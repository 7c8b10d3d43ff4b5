// /v1/tenants and their tokens: the admin token's routes. Tenants have a quota and a weight;
// tokens are shown once and kept only as SHA-256 digests.
#include <regex>

#include "absl/strings/str_cat.h"
#include "api/job_json.h"
#include "api/routes.h"
#include "common/text.h"

namespace weft::api {
namespace {

using Request = httplib::Request;
using Response = httplib::Response;

nlohmann::json TenantJson(const TenantRecord& t) {
  nlohmann::json j = {
      {"name", t.name}, {"weight", t.weight}, {"created", FormatTimeMs(t.created_ms)}};
  j["quota"] = t.has_quota ? nlohmann::json{{"cpus", t.quota_cpus},
                                            {"memory_mb", t.quota_memory_mb},
                                            {"gpus", t.quota_gpus}}
                           : nlohmann::json(nullptr);
  j["disk_quota_mb"] = t.disk_quota_mb ? nlohmann::json(*t.disk_quota_mb) : nullptr;
  return j;
}

// The tenant's disk: its quota in effect, what its files take (bytes, inodes) and what of them
// cannot be measured, which puts it over its quota (control/disk_quota.h); null when weftd
// enforces no disk quotas.
nlohmann::json DiskJson(const Services& s, const TenantRecord& t) {
  DiskQuota* disk = s.disk_quota;
  if (disk == nullptr) return nullptr;
  auto used = disk->Usage(t.name, /*max_age_ms=*/2000);
  const int64_t quota = disk->QuotaBytes(t);
  return {{"used_bytes", used.ok() ? nlohmann::json(used->bytes) : nullptr},
          {"used_inodes", used.ok() ? nlohmann::json(used->inodes) : nullptr},
          {"unmeasured", used.ok() ? nlohmann::json(used->unmeasured) : nlohmann::json::array()},
          {"quota_bytes", quota > 0 ? nlohmann::json(quota) : nullptr}};
}

using Problems = nlohmann::json;  // [{"field", "problem"}]

// A key of the request body as a field name: printable, and never empty (found by fuzz_rest: an
// empty key gave a problem that named no field).
void Problem(Problems* problems, const std::string& field, const std::string& what) {
  problems->push_back({{"field", field}, {"problem", what}});
}

// quota: {cpus, memory_mb, gpus} or null.
void ReadQuota(const nlohmann::json& q, TenantRecord* t, Problems* problems) {
  if (q.is_null()) {
    t->has_quota = false;
    return;
  }
  if (!q.is_object())
    return Problem(problems, "quota", "must be an object {cpus, memory_mb, gpus} or null");
  t->has_quota = true;
  for (const auto& [k, v] : q.items()) {
    if (k == "cpus" && v.is_number() && v.get<double>() >= 0) {
      t->quota_cpus = v;
    } else if (k == "memory_mb" && v.is_number_integer() && v.get<int64_t>() >= 0) {
      t->quota_memory_mb = v;
    } else if (k == "gpus" && v.is_number_integer() && v.get<int64_t>() >= 0) {
      t->quota_gpus = v;
    } else if (k == "cpus" || k == "memory_mb" || k == "gpus") {
      Problem(problems, "quota." + k,
              k == "cpus" ? "must be a non-negative number" : "must be a non-negative integer");
    } else {
      Problem(problems, "quota." + FieldName(k), "unknown field; expected cpus, memory_mb, gpus");
    }
  }
}

// Applies a tenant body ({"name", "quota": {"cpus", "memory_mb", "gpus"} | null, "weight",
// "disk_quota_mb": MiB | null}) to `t`, collecting problems by field. `creating` requires the
// name.
void ReadTenantBody(const nlohmann::json& body, bool creating, TenantRecord* t,
                    Problems* problems) {
  if (!body.is_object()) return Problem(problems, "(document)", "must be a JSON object");
  for (const auto& [k, v] : body.items()) {
    if (k != "name" && k != "quota" && k != "weight" && k != "disk_quota_mb") {
      Problem(problems, FieldName(k), "unknown field; expected name, quota, weight, disk_quota_mb");
    }
  }
  if (creating) {
    static const std::regex kName("[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?");
    if (!body.contains("name") || !body["name"].is_string() ||
        !std::regex_match(body["name"].get<std::string>(), kName)) {
      Problem(problems, "name",
              "is required: lower-case letters, digits and '-', at most 40 characters");
    } else {
      t->name = body["name"];
    }
  }
  if (body.contains("weight")) {
    if (!body["weight"].is_number() || body["weight"].get<double>() <= 0) {
      Problem(problems, "weight", "must be a positive number");
    } else {
      t->weight = body["weight"];
    }
  }
  if (body.contains("quota")) ReadQuota(body["quota"], t, problems);
  if (body.contains("disk_quota_mb")) {
    const nlohmann::json& d = body["disk_quota_mb"];
    if (d.is_null()) {
      t->disk_quota_mb.reset();
    } else if (d.is_number_integer() && d.get<int64_t>() >= 1 &&
               d.get<int64_t>() <= (int64_t{1} << 30)) {
      t->disk_quota_mb = d.get<int64_t>();
    } else {
      Problem(problems, "disk_quota_mb",
              "must be an integer number of MiB in [1, 1073741824], or null for weftd's "
              "--tenant-disk-quota-mb");
    }
  }
}

// GET /v1/whoami: whose the token is, so a client (the dashboard) knows what it may show
// without trying an admin route.
void Whoami(const Services&, const Request&, Response& res, const Caller& caller) {
  SendJson(res, 200,
           {{"admin", caller.admin},
            {"tenant", caller.admin ? nlohmann::json(nullptr) : nlohmann::json(caller.tenant)}});
}

void ListTenants(const Services& s, const Request&, Response& res, const Caller&) {
  auto usage = s.controller.view().Usage(s.clock.NowMs());
  if (!usage.ok()) return SendStatus(res, usage.status());
  nlohmann::json list = nlohmann::json::array();
  for (const auto& u : *usage) {
    nlohmann::json t = TenantJson(u.tenant);
    t["usage"] = {{"used", ResourcesJson(u.shares.used)},
                  {"running_jobs", u.shares.running_jobs},
                  {"queued_jobs", u.shares.waiting_jobs},
                  {"dominant_share", u.shares.dominant_share},
                  {"fair_share", u.shares.fair_share},
                  {"gpu_seconds", static_cast<double>(u.gpu_ms) / 1000.0}};
    t["disk"] = DiskJson(s, u.tenant);
    list.push_back(t);
  }
  SendJson(res, 200, {{"tenants", list}});
}

void CreateTenant(const Services& s, const Request& req, Response& res, const Caller&) {
  nlohmann::json body = nlohmann::json::parse(req.body, nullptr, false);
  TenantRecord t;
  Problems problems = nlohmann::json::array();
  ReadTenantBody(body, /*creating=*/true, &t, &problems);
  if (!problems.empty()) return SendError(res, 400, "invalid tenant", problems);
  if (absl::Status st = s.tenancy.Create(&t); !st.ok()) return SendStatus(res, st);
  res.set_header("Location", absl::StrCat("/v1/tenants/", t.name));
  SendJson(res, 201, TenantJson(t));
}

void ShowTenant(const Services& s, const Request& req, Response& res, const Caller&) {
  auto t = s.tenancy.Get(req.matches[1]);
  if (!t.ok()) return SendStatus(res, t.status());
  nlohmann::json j = TenantJson(*t);
  j["disk"] = DiskJson(s, *t);
  SendJson(res, 200, j);
}

void UpdateTenant(const Services& s, const Request& req, Response& res, const Caller&) {
  auto t = s.tenancy.Get(req.matches[1]);
  if (!t.ok()) return SendStatus(res, t.status());
  nlohmann::json body = nlohmann::json::parse(req.body, nullptr, false);
  Problems problems = nlohmann::json::array();
  if (body.is_object() && body.contains("name") && body["name"] != t->name) {
    Problem(&problems, "name", "cannot be changed");
  }
  if (body.is_object()) body.erase("name");
  ReadTenantBody(body, /*creating=*/false, &*t, &problems);
  if (!problems.empty()) return SendError(res, 400, "invalid tenant update", problems);
  if (absl::Status st = s.tenancy.Update(*t); !st.ok()) return SendStatus(res, st);
  SendJson(res, 200, TenantJson(*t));
}

void DeleteTenant(const Services& s, const Request& req, Response& res, const Caller&) {
  std::string name = req.matches[1];
  if (name == "default") return SendError(res, 409, "tenant 'default' cannot be deleted");
  // Its files go with it (Tenancy's file remover, RestServer's).
  if (absl::Status st = s.tenancy.Delete(name); !st.ok()) return SendStatus(res, st);
  SendJson(res, 200, {{"name", name}, {"deleted", true}});
}

void ListTokens(const Services& s, const Request& req, Response& res, const Caller&) {
  std::string name = req.matches[1];
  auto tokens = s.tenancy.ListTokens(name);
  if (!tokens.ok()) return SendStatus(res, tokens.status());
  nlohmann::json list = nlohmann::json::array();
  for (const auto& t : *tokens) {
    list.push_back({{"id", t.id},
                    {"created", FormatTimeMs(t.created_ms)},
                    {"revoked", t.revoked_ms ? nlohmann::json(FormatTimeMs(*t.revoked_ms))
                                             : nlohmann::json(nullptr)}});
  }
  SendJson(res, 200, {{"tenant", name}, {"tokens", list}});
}

void CreateToken(const Services& s, const Request& req, Response& res, const Caller&) {
  std::string name = req.matches[1];
  auto issued = s.tenancy.IssueToken(name);
  if (!issued.ok()) return SendStatus(res, issued.status());
  SendJson(res, 201,
           {{"id", issued->first.id},
            {"tenant", name},
            {"token", issued->second},
            {"note", "shown only now; weft keeps only its SHA-256"}});
}

void RevokeToken(const Services& s, const Request& req, Response& res, const Caller&) {
  absl::Status st = s.tenancy.RevokeToken(req.matches[1], req.matches[2]);
  if (!st.ok()) return SendStatus(res, st);
  SendJson(res, 200, {{"id", req.matches[2]}, {"revoked", true}});
}

void RotateAdmin(const Services& s, const Request&, Response& res, const Caller&) {
  if (s.admin_token_path.empty()) {
    return SendError(res, 409, "this weftd keeps no admin token file to rotate");
  }
  auto issued = s.tenancy.RotateAdminToken(s.admin_token_path);
  if (!issued.ok()) return SendStatus(res, issued.status());
  SendJson(res, 201,
           {{"id", issued->first.id},
            {"token", issued->second},
            {"note", "every other admin token is revoked; " + s.admin_token_path +
                         " holds this one; shown only now, weft keeps only its SHA-256"}});
}

}  // namespace

void AddTenantRoutes(Router& r, const Services& s) {
  r.Route("/v1/whoami", {{"GET", Bind(s, Whoami)}});
  r.Route("/v1/admin/token/rotate", {{"POST", Bind(s, RotateAdmin)}}, Access::kAdmin);
  r.Route("/v1/tenants", {{"GET", Bind(s, ListTenants)}, {"POST", Bind(s, CreateTenant)}},
          Access::kAdmin);
  r.Route(R"(/v1/tenants/([^/]+))",
          {{"GET", Bind(s, ShowTenant)},
           {"PATCH", Bind(s, UpdateTenant)},
           {"DELETE", Bind(s, DeleteTenant)}},
          Access::kAdmin);
  r.Route(R"(/v1/tenants/([^/]+)/tokens)",
          {{"GET", Bind(s, ListTokens)}, {"POST", Bind(s, CreateToken)}}, Access::kAdmin);
  r.Route(R"(/v1/tenants/([^/]+)/tokens/([^/]+))", {{"DELETE", Bind(s, RevokeToken)}},
          Access::kAdmin);
}

}  // namespace weft::api
