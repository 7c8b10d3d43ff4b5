// The REST API's routes, one file per resource: jobs (routes_jobs.cc), experiments
// (routes_experiments.cc), tenants and their tokens (routes_tenants.cc), the queue and nodes
// (routes_cluster.cc), tenants' uploads (routes_artifacts.cc), data sets (routes_datasets.cc),
// events (routes_events.cc), webhooks (routes_webhooks.cc) and the dashboard's files
// (routes_ui.cc). docs/openapi.yaml lists them.
#pragma once

#include <memory>

#include "api/http.h"
#include "api/rest_server.h"
#include "common/clock.h"
#include "control/artifacts.h"
#include "control/controller.h"
#include "control/datasets.h"
#include "control/experiment_controller.h"
#include "control/experiment_queries.h"
#include "control/job_queries.h"
#include "control/tenancy.h"
#include "control/webhooks.h"

namespace weft::api {

// What the handlers work with: control/'s services, never the store. Borrowed; they outlive the
// server.
struct Services {
  Controller& controller;  // jobs' lifecycle, the queue and nodes
  JobQueries& jobs;        // reads of jobs, each as its caller may see it
  Tenancy& tenancy;        // tenants and tokens
  Datasets& datasets;
  const Executor& executor;          // where learners run: its runtime and whether it can
  const Clock& clock;                // the time a scrape reports
  std::string admin_token_path;      // RestOptions::admin_token_path
  StreamLimiter* streams = nullptr;  // follow streams' places; null: unlimited
  Artifacts* artifacts = nullptr;    // tenants' uploads; null: no /v1/artifacts routes
  Webhooks* webhooks = nullptr;      // tenants' webhooks; null: no /v1/webhooks
  StreamLimiter* uploads = nullptr;  // uploads' places (each holds a thread); null: unlimited
  int upload_timeout_s = 300;        // an upload's whole body, seconds; past it 408
  DiskQuota* disk_quota = nullptr;   // tenants' disk use against their quotas; null: none
  Images* images = nullptr;          // container images jobs name; null: no /v1/images routes
  // Experiments' reads and actions; either null: no /v1/experiments routes.
  ExperimentQueries* experiment_queries = nullptr;
  ExperimentController* experiments = nullptr;
};

// A route's handler over the services; Bind makes it a Handler. `services` must outlive it.
using RouteFn = void (*)(const Services&, const httplib::Request&, httplib::Response&,
                         const Caller&);
inline Handler Bind(const Services& services, RouteFn fn) {
  return [&services, fn](const httplib::Request& req, httplib::Response& res,
                         const Caller& caller) { fn(services, req, res, caller); };
}

// Puts the whole REST API on `server`: routes, error fallbacks, limits and connection settings.
// RestServer does this on its own server; the fuzz target on one fed from memory. `services`
// and `limiter` (may be null) must outlive the server.
void InstallApi(httplib::Server& server, const Services& services, RateLimiter* limiter,
                const RestOptions& options);

// A place for one more long-lived stream of the caller (a followed log, an event stream) in
// `lease`: left null for the admin, who is not counted, or without a limiter. False after
// answering 429 with Retry-After when the caller's tenant or the server is at its limit.
bool AcquireStream(const Services& services, const Caller& caller, httplib::Response& res,
                   std::shared_ptr<StreamLimiter::Lease>* lease);

void AddJobRoutes(Router& router, const Services& services);
void AddExperimentRoutes(Router& router, const Services& services);
void AddEventRoutes(Router& router, const Services& services);
void AddWebhookRoutes(Router& router, const Services& services);
void AddTenantRoutes(Router& router, const Services& services);
void AddClusterRoutes(Router& router, const Services& services);
void AddArtifactRoutes(Router& router, const Services& services);
void AddDatasetRoutes(Router& router, const Services& services);
void AddImageRoutes(Router& router, const Services& services);
// GET /, /ui and /ui/{file}: the dashboard (routes_ui.cc), public, under kUiContentSecurityPolicy.
void AddUiRoutes(Router& router);

// What the dashboard's page may load: scripts, styles, images and API calls from weftd itself,
// nothing inline, no plugins, frames, forms or base URL of another origin.
inline constexpr char kUiContentSecurityPolicy[] =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

}  // namespace weft::api
