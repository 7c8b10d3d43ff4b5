// /v1/queue and /v1/nodes: what waits and why, and what each node holds. A tenant sees its own
// jobs by name and only a count of the others'.
#include "api/job_json.h"
#include "api/routes.h"

namespace weft::api {
namespace {

using Request = httplib::Request;
using Response = httplib::Response;

void Queue(const Services& s, const Request&, Response& res, const Caller& caller) {
  auto queue = s.controller.view().Queue(caller.admin ? "" : caller.tenant);
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
                    {"code", scheduler::WaitCodeName(e.waiting.code)},
                    {"reason", e.waiting.reason}});
  }
  const ClusterView::RoundTime round = s.controller.view().LastRound();
  SendJson(res, 200,
           {{"queue", list},
            {"round",
             {{"last_ms", round.last_ms},
              {"max_ms", round.max_ms},
              {"active_jobs", round.active_jobs},
              {"rounds", round.rounds}}}});
}

void Nodes(const Services& s, const Request&, Response& res, const Caller& caller) {
  auto nodes = s.controller.view().Nodes();
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
}

}  // namespace

void AddClusterRoutes(Router& r, const Services& s) {
  r.Route("/v1/queue", {{"GET", Bind(s, Queue)}});
  r.Route("/v1/nodes", {{"GET", Bind(s, Nodes)}});
}

}  // namespace weft::api
