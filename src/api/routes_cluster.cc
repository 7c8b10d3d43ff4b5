// /v1/queue and /v1/nodes: what waits and why, and what each node holds. A tenant sees its own
// jobs by name and only a count of the others'. /metrics: the same and more for Prometheus, to
// the admin only.
#include <algorithm>
#include <map>
#include <set>

#include "api/job_json.h"
#include "api/routes.h"
#include "common/metrics.h"
#include "common/status_macros.h"

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
    nlohmann::json next = nullptr;
    if (e.estimate.target != nullptr) {
      next = {{"target", e.estimate.target},
              {"eta_s", e.estimate.seconds ? nlohmann::json(*e.estimate.seconds) : nullptr},
              {"beyond_budget", e.estimate.beyond_budget}};
    }
    list.push_back({{"position", ++position},
                    {"id", e.job.id},
                    {"name", e.job.name},
                    {"tenant", e.job.tenant},
                    {"state", JobStateName(e.job.state)},
                    {"priority", e.priority},
                    {"submitted", FormatTimeMs(e.job.created_ms)},
                    {"code", scheduler::WaitCodeName(e.waiting.code)},
                    {"reason", e.waiting.reason},
                    {"next_target", std::move(next)}});
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

// A node's GPUs and who holds each: [{"index", "cdi", "model", "held", "job", "learner"}]; a
// device another tenant's learner holds names no job ("job": null, held), nor does one a learner
// still holds while it leaves its job after a shrink.
nlohmann::json GpusJson(const ClusterView::NodeUsage& u, const Caller& caller) {
  std::map<int, std::pair<const JobRecord*, int>> holder;  // index -> (job, learner id)
  for (const JobRecord& j : u.jobs) {
    for (const LearnerSlot& l : j.learners) {
      if (l.node != u.node.name) continue;
      for (int g : l.gpus) holder[g] = {&j, l.id};
    }
  }
  const std::set<int> held(u.node.gpus_held.begin(), u.node.gpus_held.end());
  nlohmann::json out = nlohmann::json::array();
  for (const scheduler::GpuDevice& g : u.node.gpu_devices) {
    nlohmann::json d = {{"index", g.index}, {"cdi", g.cdi},
                        {"model", g.model}, {"held", held.count(g.index) > 0},
                        {"job", nullptr},   {"learner", nullptr}};
    if (auto it = holder.find(g.index); it != holder.end()) {
      const JobRecord& j = *it->second.first;
      if (caller.admin || j.tenant == caller.tenant) {
        d["job"] = j.id;
        d["learner"] = it->second.second;
      }
    }
    out.push_back(std::move(d));
  }
  return out;
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
                    {"gpus", GpusJson(u, caller)},
                    {"jobs", jobs},
                    {"other_tenants_jobs", others}});
  }
  // What every learner runs in, and whether it can (weftd --runtime).
  const Executor& executor = s.executor;
  const absl::Status available = executor.Available();
  nlohmann::json runtime = {{"name", executor.Runtime()},
                            {"description", executor.RuntimeDescription()},
                            {"available", available.ok()}};
  if (!available.ok()) runtime["reason"] = std::string(available.message());
  SendJson(res, 200, {{"nodes", list}, {"runtime", runtime}});
}

// The gauges a scrape computes now: active jobs by tenant and state, the queue per tenant, each
// running job's samples and restarts, and each node's capacity and allocation.
absl::Status AppendGauges(const Services& s, std::string* out) {
  ASSIGN_OR_RETURN(std::vector<JobRecord> jobs, s.jobs.Active());
  ASSIGN_OR_RETURN(auto queue, s.controller.view().Queue(""));
  ASSIGN_OR_RETURN(auto nodes, s.controller.view().Nodes());
  std::map<Labels, double> by_state, queued, oldest;
  std::vector<std::pair<Labels, double>> samples, restarts, job_gpu_seconds;
  std::map<std::string, Labels> holding;  // jobs holding learners: their own labels
  for (const JobRecord& r : jobs) {
    by_state[{{"tenant", r.tenant}, {"state", JobStateName(r.state)}}] += 1;
    if (r.learners.empty()) continue;
    holding[r.id] = {{"tenant", r.tenant}, {"job", r.id}};
    samples.push_back(
        {{{"tenant", r.tenant}, {"job", r.id}}, static_cast<double>(r.progress.samples)});
    restarts.push_back({{{"tenant", r.tenant}, {"job", r.id}}, static_cast<double>(r.restarts)});
  }
  const TimeMs now = s.clock.NowMs();
  for (const JobRecord& r : jobs) {
    if (const int64_t ms = r.GpuMs(now); ms > 0) {
      job_gpu_seconds.push_back({{{"tenant", r.tenant}, {"job", r.id}}, ms / 1000.0});
    }
  }
  ASSIGN_OR_RETURN(auto usage, s.controller.view().Usage(now));
  std::vector<std::pair<Labels, double>> tenant_gpu_seconds;
  for (const auto& u : usage)
    tenant_gpu_seconds.push_back({{{"tenant", u.tenant.name}}, u.gpu_ms / 1000.0});
  for (const auto& e : queue) {
    const Labels tenant = {{"tenant", e.job.tenant}};
    queued[tenant] += 1;
    oldest[tenant] = std::max(oldest[tenant], (now - e.job.created_ms) / 1000.0);
  }
  std::vector<std::pair<Labels, double>> cpus, allocated, gpus, allocated_gpus;
  for (const auto& u : nodes) {
    cpus.push_back({{{"node", u.node.name}}, u.node.capacity.cpus});
    allocated.push_back({{{"node", u.node.name}}, u.node.allocated.cpus});
    gpus.push_back({{{"node", u.node.name}}, static_cast<double>(u.node.capacity.gpus)});
    allocated_gpus.push_back(
        {{{"node", u.node.name}}, static_cast<double>(u.node.gpus_held.size())});
  }
  auto list = [](const std::map<Labels, double>& m) {
    return std::vector<std::pair<Labels, double>>(m.begin(), m.end());
  };
  RenderGauge("weft_jobs", "active jobs (not yet ended) by tenant and state", list(by_state), out);
  RenderGauge("weft_queue_length", "jobs waiting to be placed, by tenant", list(queued), out);
  RenderGauge("weft_queue_oldest_wait_seconds",
              "seconds since the submission of the oldest waiting job, by tenant", list(oldest),
              out);
  RenderGauge("weft_job_samples",
              "training samples a job holding learners has trained (rate() gives samples/s)",
              samples, out);
  RenderGauge("weft_job_restarts", "restarts of a job holding learners", restarts, out);
  RenderGauge("weft_node_cpus", "cpus of each node", cpus, out);
  RenderGauge("weft_node_allocated_cpus", "cpus of each node held by jobs", allocated, out);
  RenderGauge("weft_node_gpus", "GPU devices of each node", gpus, out);
  RenderGauge("weft_node_allocated_gpus", "GPU devices of each node held by learners",
              allocated_gpus, out);
  RenderGauge("weft_job_gpu_seconds",
              "GPU-seconds an active job's learners have held, over all its attempts",
              job_gpu_seconds, out);
  RenderGauge("weft_tenant_gpu_seconds",
              "GPU-seconds a tenant's jobs' learners have held since it was created (deleted "
              "jobs' included)",
              tenant_gpu_seconds, out);
  // What learners report of their own (a parameter server's counters), for jobs still holding
  // learners; the others' are forgotten.
  JobGauges::Global().RenderAndPrune(holding, out);
  return absl::OkStatus();
}

// GET /metrics (admin token): Prometheus's text format, counters and histograms as they were
// counted and the gauges as they are now.
void Metrics(const Services& s, const Request&, Response& res, const Caller&) {
  std::string out = MetricsRegistry::Global().Render();
  if (absl::Status g = AppendGauges(s, &out); !g.ok()) return SendStatus(res, g);
  res.status = 200;
  res.set_content(out, "text/plain; version=0.0.4; charset=utf-8");
}

}  // namespace

void AddClusterRoutes(Router& r, const Services& s) {
  r.Route("/v1/queue", {{"GET", Bind(s, Queue)}});
  r.Route("/v1/nodes", {{"GET", Bind(s, Nodes)}});
  r.Route("/metrics", {{"GET", Bind(s, Metrics)}}, Access::kAdmin);
}

}  // namespace weft::api
