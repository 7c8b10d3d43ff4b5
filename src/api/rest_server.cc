#include "api/rest_server.h"

#include <httplib.h>

#include "absl/strings/str_cat.h"
#include "api/http.h"
#include "api/routes.h"

namespace weft::api {
namespace {

// Unrouted paths and handler exceptions still answer with the API's error body.
void AddFallbacks(httplib::Server& s, size_t max_request_bytes) {
  s.set_error_handler([max_request_bytes](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404) {
      SendError(res, 404,
                absl::StrCat("no route ", req.method, " ", req.path, "; see docs/openapi.yaml"));
    } else if (res.status == 413) {
      SendError(res, 413,
                absl::StrCat("the request body is over the ", max_request_bytes,
                             " bytes weftd accepts (weftd --max-request-bytes)"));
    } else {
      SendError(res, res.status, "request failed");
    }
  });
  s.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown error";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        SendError(res, 500, absl::StrCat("internal error: ", what));
      });
}

}  // namespace

RestServer::RestServer(Store& store, Controller& controller, const Clock& clock,
                       size_t max_request_bytes)
    : services_(std::make_unique<Services>(Services{store, controller, clock})),
      server_(std::make_unique<httplib::Server>()) {
  server_->new_task_queue = [] { return new httplib::ThreadPool(32); };
  server_->set_payload_max_length(max_request_bytes);
  AddFallbacks(*server_, max_request_bytes);
  Router router(*server_, store);
  router.Route("/healthz",
               {{"GET",
                 [](const httplib::Request&, httplib::Response& res, const Caller&) {
                   SendJson(res, 200, {{"status", "ok"}});
                 }}},
               Access::kPublic);
  AddJobRoutes(router, *services_);
  AddTenantRoutes(router, *services_);
  AddClusterRoutes(router, *services_);
}

RestServer::~RestServer() { Stop(); }

absl::Status RestServer::Start(const std::string& host, int port) {
  if (!server_->bind_to_port(host.c_str(), port)) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", host, ":", port,
                                               " (in use? try --listen with another port)"));
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  return absl::OkStatus();
}

void RestServer::Stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace weft::api
