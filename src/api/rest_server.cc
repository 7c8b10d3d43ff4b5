#include "api/rest_server.h"

#include <httplib.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "api/http.h"
#include "api/routes.h"
#include "common/files.h"

namespace weft::api {
namespace {

constexpr char kUploadPath[] = "/v1/artifacts";

// Unrouted paths and handler exceptions still answer with the API's error body.
void AddFallbacks(httplib::Server& s, size_t max_request_bytes) {
  s.set_error_handler([max_request_bytes](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404) {
      SendError(res, 404,
                absl::StrCat("no route ", req.method, " ", req.path, "; see docs/openapi.yaml"));
    } else if (res.status == 413) {
      SendError(res, 413,
                req.path == kUploadPath
                    ? absl::StrCat("the upload is over the ", max_request_bytes,
                                   " bytes weftd accepts (weftd --max-artifact-mb)")
                    : absl::StrCat("the request body is over the ", max_request_bytes,
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

void InstallApi(httplib::Server& server, const Services& services, RateLimiter* limiter,
                const RestOptions& options) {
  const size_t threads = static_cast<size_t>(std::max(1, options.threads));
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  // Small JSON answers on kept-alive connections would otherwise wait for the client's delayed
  // ACK (Nagle's algorithm): about 40 ms each. Accepted sockets inherit it from the listener.
  server.set_tcp_nodelay(true);
  server.set_keep_alive_max_count(1000);
  server.set_keep_alive_timeout(options.idle_timeout_s);
  server.set_read_timeout(options.read_timeout_s);
  server.set_write_timeout(options.read_timeout_s);
  // Uploads may be larger than other bodies: httplib's own limit is the larger one, and BodyLimits
  // holds every other route to max_request_bytes before a byte of a body is read.
  const size_t max_upload = services.artifacts != nullptr
                                ? static_cast<size_t>(services.artifacts->limits().max_bytes)
                                : options.max_request_bytes;
  server.set_payload_max_length(std::max(options.max_request_bytes, max_upload));
  server.set_pre_routing_handler(BodyLimits{options.max_request_bytes, max_upload, kUploadPath});
  AddFallbacks(server, std::max(options.max_request_bytes, max_upload));
  Router router(server, services.tenancy, limiter);
  router.Route("/healthz",
               {{"GET",
                 [](const httplib::Request&, httplib::Response& res, const Caller&) {
                   SendJson(res, 200, {{"status", "ok"}});
                 }}},
               Access::kPublic);
  AddJobRoutes(router, services);
  if (services.experiments != nullptr && services.experiment_queries != nullptr) {
    AddExperimentRoutes(router, services);
  }
  AddEventRoutes(router, services);
  AddTenantRoutes(router, services);
  AddClusterRoutes(router, services);
  if (services.artifacts != nullptr) AddArtifactRoutes(router, services);
  AddDatasetRoutes(router, services);
  AddImageRoutes(router, services);
  if (services.webhooks != nullptr) AddWebhookRoutes(router, services);
  AddUiRoutes(router);
}

RestServer::RestServer(Store& store, Controller& controller, RestParts parts, const Clock& clock,
                       RestOptions options)
    : jobs_(store),
      experiments_(store),
      tenancy_(store, clock),
      datasets_(store, clock),
      webhooks_(store, clock, options.webhooks),
      limiter_(std::make_unique<RateLimiter>(options.tenant_rate, clock)),
      streams_(std::make_unique<StreamLimiter>(options.follow_streams_per_tenant,
                                               std::max(1, options.threads / 2))),
      uploads_(std::make_unique<StreamLimiter>(options.uploads_per_tenant,
                                               std::max(1, options.threads / 4))),
      server_(options.tls_cert_path.empty()
                  ? std::make_unique<httplib::Server>()
                  : std::make_unique<httplib::SSLServer>(options.tls_cert_path.c_str(),
                                                         options.tls_key_path.c_str())) {
  services_ = std::make_unique<Services>(Services{
      controller, jobs_, tenancy_, datasets_, *parts.executor, clock, options.admin_token_path,
      streams_.get(), parts.artifacts, &webhooks_, uploads_.get(), options.upload_timeout_s,
      parts.disk_quota, parts.images, &experiments_, parts.experiments});
  // A tenant's files: its uploads, and weftd's own (its jobs' kernel choices). Both are tried;
  // the first error comes back.
  tenancy_.SetFileRemover([&controller, artifacts = parts.artifacts](const std::string& tenant) {
    absl::Status uploads =
        artifacts != nullptr ? artifacts->RemoveTenant(tenant) : absl::OkStatus();
    absl::Status own = RemoveAll(controller.layout().TenantDir(tenant));
    return uploads.ok() ? own : uploads;
  });
  InstallApi(*server_, *services_, limiter_.get(), options);
}

RestServer::~RestServer() { Stop(); }

absl::Status RestServer::Start(const std::string& host, int port) {
  if (!server_->is_valid()) {
    return absl::InvalidArgumentError(
        "the TLS certificate (--tls-cert) and private key (--tls-key) do not load as a matching "
        "PEM pair");
  }
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
