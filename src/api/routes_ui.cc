// GET /ui/ and its files: the web dashboard (ui/src), served from weftd's own binary. The files
// hold no secrets and are public; the page asks for a token and sends it as the bearer header of
// its API calls, and every answer carries a Content-Security-Policy that lets the page load
// scripts, styles and data only from weftd itself, and nothing inline.
#include "absl/strings/str_cat.h"
#include "api/routes.h"
#include "api/ui_assets.h"

namespace weft::api {
namespace {

using Request = httplib::Request;
using Response = httplib::Response;

void SetSecurityHeaders(Response& res) {
  res.set_header("Content-Security-Policy", kUiContentSecurityPolicy);
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Referrer-Policy", "no-referrer");
  res.set_header("Cache-Control", "no-cache");
}

void Redirect(const Request&, Response& res, const Caller&) {
  res.status = 302;
  res.set_header("Location", "/ui/");
}

void Asset(const Request& req, Response& res, const Caller&) {
  const std::string name = req.matches[1].str().empty() ? "index.html" : req.matches[1].str();
  for (const UiAsset& a : UiAssets()) {
    if (a.path != name) continue;
    SetSecurityHeaders(res);
    res.status = 200;
    res.set_content(a.body.data(), a.body.size(), std::string(a.content_type));
    return;
  }
  SendError(res, 404, absl::StrCat("no dashboard file '", name, "'; the dashboard is at /ui/"));
}

}  // namespace

void AddUiRoutes(Router& r) {
  r.Route("/", {{"GET", Redirect}}, Access::kPublic);
  r.Route("/ui", {{"GET", Redirect}}, Access::kPublic);
  r.Route(R"(/ui/([A-Za-z0-9_.-]*))", {{"GET", Asset}}, Access::kPublic);
}

}  // namespace weft::api
