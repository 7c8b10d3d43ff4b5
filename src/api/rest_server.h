// weftd's REST API (cpp-httplib + nlohmann::json). JSON in and out; manifests in YAML or JSON.
// Every error is a JSON body {"error": {"code", "message"[, "details"]}} with a message a person
// can act on: 400 bad input, 401/403 tokens, 404 unknown job or route, 405 wrong method, 409
// wrong state. The routes are in routes_*.cc and listed in docs/openapi.yaml.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "common/clock.h"
#include "common/rate_limit.h"
#include "control/artifacts.h"
#include "control/controller.h"
#include "control/datasets.h"
#include "control/disk_quota.h"
#include "control/experiment_controller.h"
#include "control/experiment_queries.h"
#include "control/images.h"
#include "control/job_queries.h"
#include "control/tenancy.h"
#include "control/webhooks.h"
#include "executor/executor.h"
#include "store/store.h"

namespace httplib {
class Server;
}

namespace weft::api {

struct Services;

struct RestOptions {
  // A request body over this many bytes is answered 413 without being read.
  size_t max_request_bytes = size_t{4} << 20;
  // Each tenant's requests; over it, 429 with Retry-After. The admin token is not limited.
  RateLimit tenant_rate = {50, 100};  // requests per second, burst
  // Threads serving connections; a connection holds one while it is open (keep-alive included),
  // an idle one for at most `idle_timeout_s`, a silent one for at most `read_timeout_s`.
  int threads = 32;
  // `logs?follow=true` streams open at once per tenant; all tenants together get at most half
  // the threads. Over either, 429.
  int follow_streams_per_tenant = 4;
  // Uploads (POST /v1/artifacts) in progress at once per tenant; all tenants together get at
  // most a quarter of the threads. Over either, 429. An upload's body must arrive within
  // `upload_timeout_s` seconds, else 408 and the connection is closed.
  int uploads_per_tenant = 2;
  int upload_timeout_s = 300;
  int idle_timeout_s = 5;
  int read_timeout_s = 5;
  // Where POST /v1/admin/token/rotate writes the new admin token (weftd: <data-dir>/admin.token).
  std::string admin_token_path;
  // HTTPS with this certificate chain and private key (PEM files); both empty: plain HTTP.
  std::string tls_cert_path;
  std::string tls_key_path;
  // Tenants' webhooks: the hosts receivers may be on, and how deliveries are made.
  WebhookOptions webhooks;
};

// What the routes use beside the controller and the services RestServer makes over the store,
// from weftd's wiring; all borrowed, and they must outlive the server.
struct RestParts {
  Artifacts* artifacts = nullptr;      // tenants' uploads; null: no /v1/artifacts routes
  DiskQuota* disk_quota = nullptr;     // tenants' disk use and quotas; null: none
  Images* images = nullptr;            // the container images jobs name; null: none
  const Executor* executor = nullptr;  // where learners run (GET /v1/nodes' runtime); required
  ExperimentController* experiments = nullptr;  // null: no /v1/experiments routes
};

class RestServer {
 public:
  // `parts.executor` is required.
  RestServer(Store& store, Controller& controller, RestParts parts,
             const Clock& clock = SystemClock::Get(), RestOptions options = {});
  ~RestServer();
  RestServer(const RestServer&) = delete;
  RestServer& operator=(const RestServer&) = delete;

  // Binds host:port and serves on a background thread. Unavailable if it cannot bind;
  // InvalidArgument if the TLS certificate or key does not load.
  absl::Status Start(const std::string& host, int port);
  // Stops accepting and waits for the serving thread.
  void Stop();

 private:
  // control/'s services over the store, which Services points at.
  JobQueries jobs_;
  ExperimentQueries experiments_;
  Tenancy tenancy_;
  Datasets datasets_;
  Webhooks webhooks_;
  std::unique_ptr<Services> services_;  // what the handlers work with; they hold on to it
  std::unique_ptr<RateLimiter> limiter_;
  std::unique_ptr<StreamLimiter> streams_;
  std::unique_ptr<StreamLimiter> uploads_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
};

}  // namespace weft::api
