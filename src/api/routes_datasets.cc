// /v1/datasets: the data sets the admin registers and manifests name (data.dataset;
// control/datasets.h). The admin registers, lists and removes them; a tenant sees only those
// granted to it, without their paths, and any other name is 404 as a missing one is.
#include "absl/strings/str_cat.h"
#include "api/routes.h"
#include "common/text.h"
#include "control/datasets.h"

namespace weft::api {
namespace {

using Request = httplib::Request;
using Response = httplib::Response;

// What a tenant sees of a data set; the admin also sees where it lives and who may use it.
nlohmann::json DatasetJson(const DatasetRecord& d, bool admin) {
  nlohmann::json j = {
      {"name", d.name}, {"format", d.format}, {"created", FormatTimeMs(d.created_ms)}};
  if (admin) {
    j["path"] = d.path;
    j["tenants"] = d.all_tenants ? nlohmann::json("all") : nlohmann::json(d.tenants);
  }
  return j;
}

// Answers 403 unless the caller is the admin.
bool RefuseTenant(const Caller& caller, Response& res, const char* what) {
  if (caller.admin) return false;
  SendError(res, 403, absl::StrCat(what, " data sets is the admin's (weft dataset add/delete)"));
  return true;
}

// A registration body {"name", "path", "format" (default idx), "tenants": "all" | ["a", ...]}
// as a record, collecting problems by field.
DatasetRecord ReadDatasetBody(const nlohmann::json& body, nlohmann::json* problems) {
  DatasetRecord d;
  d.format = "idx";
  auto problem = [problems](const std::string& field, const std::string& what) {
    problems->push_back({{"field", field}, {"problem", what}});
  };
  if (!body.is_object()) {
    problem("(document)", "must be a JSON object {name, path, format, tenants}");
    return d;
  }
  for (const auto& [k, v] : body.items()) {
    if (k == "name" || k == "path" || k == "format") {
      if (!v.is_string()) {
        problem(k, "must be a string");
        continue;
      }
      (k == "name" ? d.name : k == "path" ? d.path : d.format) = v.get<std::string>();
    } else if (k == "tenants") {
      if (v.is_string() && v.get<std::string>() == "all") {
        d.all_tenants = true;
      } else if (v.is_array() && !v.empty() && v.size() <= 1000) {
        for (const auto& t : v) {
          if (!t.is_string()) {
            problem("tenants", "must hold tenants' names (strings)");
            break;
          }
          d.tenants.push_back(t.get<std::string>());
        }
      } else {
        problem("tenants", "must be \"all\" or a list of 1 to 1000 tenants' names");
      }
    } else {
      problem(FieldName(k), "unknown field; expected name, path, format, tenants");
    }
  }
  if (!body.contains("name")) problem("name", "is required");
  if (!body.contains("path")) problem("path", "is required (a directory on every node)");
  if (!body.contains("tenants")) problem("tenants", "is required: \"all\" or a list of tenants");
  return d;
}

void List(const Services& s, const Request&, Response& res, const Caller& caller) {
  auto usable = s.datasets.List(caller);
  if (!usable.ok()) return SendStatus(res, usable.status());
  nlohmann::json list = nlohmann::json::array();
  for (const DatasetRecord& d : *usable) list.push_back(DatasetJson(d, caller.admin));
  SendJson(res, 200, {{"datasets", list}});
}

void Register(const Services& s, const Request& req, Response& res, const Caller& caller) {
  if (RefuseTenant(caller, res, "registering")) return;
  nlohmann::json problems = nlohmann::json::array();
  DatasetRecord d = ReadDatasetBody(nlohmann::json::parse(req.body, nullptr, false), &problems);
  if (!problems.empty()) return SendError(res, 400, "invalid data set", problems);
  std::vector<FieldError> errors;
  if (absl::Status st = s.datasets.Register(&d, &errors); !st.ok()) {
    if (!absl::IsInvalidArgument(st) || errors.empty()) return SendStatus(res, st);
    for (const FieldError& e : errors)
      problems.push_back({{"field", e.field}, {"problem", e.problem}});
    return SendError(res, 400, "invalid data set", problems);
  }
  res.set_header("Location", absl::StrCat("/v1/datasets/", d.name));
  SendJson(res, 201, DatasetJson(d, /*admin=*/true));
}

void Show(const Services& s, const Request& req, Response& res, const Caller& caller) {
  const std::optional<std::string> checked = NameInPath(req, res, "data set");
  if (!checked) return;
  const std::string& name = *checked;
  absl::StatusOr<DatasetRecord> d = s.datasets.Get(caller, name);
  if (!d.ok()) return SendStatus(res, d.status());
  SendJson(res, 200, DatasetJson(*d, caller.admin));
}

void Delete(const Services& s, const Request& req, Response& res, const Caller& caller) {
  if (RefuseTenant(caller, res, "removing")) return;
  const std::optional<std::string> checked = NameInPath(req, res, "data set");
  if (!checked) return;
  const std::string& name = *checked;
  if (absl::Status st = s.datasets.Delete(name); !st.ok()) return SendStatus(res, st);
  SendJson(res, 200, {{"name", name}, {"deleted", true}});
}

}  // namespace

void AddDatasetRoutes(Router& r, const Services& s) {
  r.Route("/v1/datasets", {{"GET", Bind(s, List)}, {"POST", Bind(s, Register)}});
  r.Route(R"(/v1/datasets/([^/]+))", {{"GET", Bind(s, Show)}, {"DELETE", Bind(s, Delete)}});
}

}  // namespace weft::api
