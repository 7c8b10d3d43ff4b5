// /v1/images: the container images jobs run on (control/images.h; a manifest's `image`). A tenant
// registers its own from an artifact it uploaded and sees its own and the admin's granted to it;
// another tenant's answers 404 as a missing one. The admin registers images from files on weftd's
// host, granted to tenants as data sets are, and sees every image.
#include "absl/strings/str_cat.h"
#include "api/routes.h"
#include "common/text.h"
#include "control/images.h"

namespace weft::api {
namespace {

using Request = httplib::Request;
using Response = httplib::Response;

nlohmann::json ImageJson(const ImageRecord& i, bool admin) {
  nlohmann::json j = {{"name", i.name},     {"owner", i.tenant.empty() ? "admin" : "tenant"},
                      {"format", i.format}, {"digest", i.digest},
                      {"bytes", i.bytes},   {"created", FormatTimeMs(i.created_ms)}};
  if (admin) {
    j["reference"] = i.reference;
    if (i.tenant.empty()) {
      j["tenants"] = i.all_tenants ? nlohmann::json("all") : nlohmann::json(i.tenants);
    } else {
      j["tenant"] = i.tenant;
    }
  }
  return j;
}

// The images of this weftd, or 409 when it runs learners without podman.
Images* ImagesOr409(const Services& s, Response& res) {
  Images* images = s.images;
  if (images == nullptr || !images->enabled()) {
    SendError(res, 409, kNoImageEngine);
    return nullptr;
  }
  return images;
}

// A registration body: a tenant's {"name", "artifact"}, the admin's {"name", "path", "tenants":
// "all" | ["a", ...]}; problems collected by field.
struct Registration {
  std::string name, artifact, path;
  bool all_tenants = false;
  std::vector<std::string> tenants;
};
Registration ReadBody(const nlohmann::json& body, bool admin, nlohmann::json* problems) {
  Registration r;
  auto problem = [problems](const std::string& field, const std::string& what) {
    problems->push_back({{"field", field}, {"problem", what}});
  };
  if (!body.is_object()) {
    problem("(document)", admin ? "must be a JSON object {name, path, tenants}"
                                : "must be a JSON object {name, artifact}");
    return r;
  }
  for (const auto& [k, v] : body.items()) {
    if (k == "name" || (k == "artifact" && !admin) || (k == "path" && admin)) {
      if (!v.is_string()) {
        problem(k, "must be a string");
        continue;
      }
      (k == "name" ? r.name : k == "artifact" ? r.artifact : r.path) = v.get<std::string>();
    } else if (k == "tenants" && admin) {
      if (v.is_string() && v.get<std::string>() == "all") {
        r.all_tenants = true;
      } else if (v.is_array() && !v.empty() && v.size() <= 1000 &&
                 std::all_of(v.begin(), v.end(), [](const auto& t) { return t.is_string(); })) {
        for (const auto& t : v) r.tenants.push_back(t.get<std::string>());
      } else {
        problem("tenants", "must be \"all\" or a list of 1 to 1000 tenants' names");
      }
    } else if (k == "path" || k == "tenants") {
      problem(k, "only the admin registers an image from a file on weftd's host");
    } else if (k == "artifact") {
      problem(k, "the admin has no artifacts: give the image's path on weftd's host");
    } else {
      problem(FieldName(k), admin ? "unknown field; expected name, path, tenants"
                                  : "unknown field; expected name, artifact");
    }
  }
  if (!body.contains("name")) problem("name", "is required");
  if (admin && !body.contains("path")) problem("path", "is required (a file on weftd's host)");
  if (admin && !body.contains("tenants")) {
    problem("tenants", "is required: \"all\" or a list of tenants");
  }
  if (!admin && !body.contains("artifact")) {
    problem("artifact", "is required (an archive you uploaded: weft artifact upload)");
  }
  return r;
}

void List(const Services& s, const Request&, Response& res, const Caller& caller) {
  Images* images = ImagesOr409(s, res);
  if (images == nullptr) return;
  auto all = images->List(caller.admin ? "" : caller.tenant);
  if (!all.ok()) return SendStatus(res, all.status());
  nlohmann::json list = nlohmann::json::array();
  for (const ImageRecord& i : *all) list.push_back(ImageJson(i, caller.admin));
  SendJson(res, 200, {{"images", list}});
}

void Register(const Services& s, const Request& req, Response& res, const Caller& caller) {
  Images* images = ImagesOr409(s, res);
  if (images == nullptr) return;
  nlohmann::json problems = nlohmann::json::array();
  Registration r =
      ReadBody(nlohmann::json::parse(req.body, nullptr, false), caller.admin, &problems);
  if (!problems.empty()) return SendError(res, 400, "invalid image", problems);
  const std::string owner = caller.admin ? "" : caller.tenant;
  if (auto existing = images->Get(owner, r.name); existing.ok()) {
    return SendError(res, 409,
                     absl::StrCat("image '", r.name, "' exists; delete it first to change it"));
  } else if (!absl::IsNotFound(existing.status())) {
    return SendStatus(res, existing.status());
  }
  std::vector<FieldError> errors;
  absl::StatusOr<ImageRecord> image =
      caller.admin ? images->ImportPath(r.name, r.path, r.all_tenants, r.tenants, &errors)
                   : images->ImportArtifact(caller.tenant, r.name, r.artifact, &errors);
  if (!image.ok()) {
    if (errors.empty()) return SendStatus(res, image.status());
    for (const FieldError& e : errors) {
      problems.push_back({{"field", e.field}, {"problem", e.problem}});
    }
    return SendError(res, 400, "invalid image", problems);
  }
  res.set_header("Location", absl::StrCat("/v1/images/", r.name));
  SendJson(res, 201, ImageJson(*image, caller.admin));
}

void Show(const Services& s, const Request& req, Response& res, const Caller& caller) {
  Images* images = ImagesOr409(s, res);
  if (images == nullptr) return;
  const std::optional<std::string> name = NameInPath(req, res, "image");
  if (!name) return;
  absl::StatusOr<ImageRecord> i =
      caller.admin ? images->Get("", *name) : images->Resolve(caller.tenant, *name);
  if (!i.ok()) return SendStatus(res, i.status());
  SendJson(res, 200, ImageJson(*i, caller.admin));
}

void Delete(const Services& s, const Request& req, Response& res, const Caller& caller) {
  Images* images = ImagesOr409(s, res);
  if (images == nullptr) return;
  const std::optional<std::string> name = NameInPath(req, res, "image");
  if (!name) return;
  // A tenant removes only its own: the admin's it may use answer as missing ones.
  if (absl::Status st = images->Delete(caller.admin ? "" : caller.tenant, *name); !st.ok()) {
    return SendStatus(res, st);
  }
  SendJson(res, 200, {{"name", *name}, {"deleted", true}});
}

}  // namespace

void AddImageRoutes(Router& r, const Services& s) {
  r.Route("/v1/images", {{"GET", Bind(s, List)}, {"POST", Bind(s, Register)}});
  r.Route(R"(/v1/images/([^/]+))", {{"GET", Bind(s, Show)}, {"DELETE", Bind(s, Delete)}});
}

}  // namespace weft::api
