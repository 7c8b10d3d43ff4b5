#include "control/cluster_view.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace weft {
namespace {

scheduler::Resources PerLearner(const JobSpec& spec) {
  return {spec.resources.cpus, spec.resources.memory_mb, spec.resources.gpus};
}

// A job holds its learners' nodes while it runs, and while preempted until they have exited.
bool HoldsNodes(JobState s) { return HoldsResources(s) || s == JobState::kPreempted; }

}  // namespace

ClusterView::ClusterView(Store& store, SpecCache& specs, JobModels& models,
                         std::vector<scheduler::Node> nodes)
    : store_(store), specs_(specs), models_(models), nodes_(std::move(nodes)) {}

scheduler::JobRequest ClusterView::Request(const JobRecord& r, const JobSpec& spec,
                                           TimeMs now) const {
  scheduler::JobRequest req;
  req.job_id = r.id;
  req.tenant = r.tenant;
  req.submitted_ms = r.created_ms;
  // A scale-out parameter-server job's weft-ps servers are members of its gang, each holding a
  // learner's resources, placed after its learners (AttemptStarter::Start splits them).
  const int servers = spec.ParameterServers();
  req.learners = req.max_learners = spec.resources.learners + servers;
  req.min_learners = spec.resources.min_learners + servers;
  req.per_learner = PerLearner(spec);
  req.restarts = r.restarts;
  req.attained_service = static_cast<double>(r.LearnerMs(now)) / 1000.0;
  req.priority = spec.priority;
  req.spread = spec.resources.placement == "spread";
  req.one_node = spec.UsesParameterServer() && servers == 0;  // beside its shared memory
  if (HoldsResources(r.state)) {
    for (const LearnerSlot& l : r.learners) {
      req.allocation.push_back(l.node);
      req.allocation_gpus.push_back(l.gpus);
    }
    for (const ServerSlot& l : r.servers) {
      req.allocation.push_back(l.node);
      req.allocation_gpus.emplace_back();
    }
  }
  return req;
}

std::vector<scheduler::Node> ClusterView::Allocated(const std::vector<JobRecord>& jobs) {
  std::map<std::string, std::vector<LearnerSlot>> leaving;
  {
    absl::MutexLock lock(&mu_);
    leaving = leaving_;
  }
  std::vector<scheduler::Node> nodes = nodes_;
  std::map<std::string, scheduler::Node*> by_name;
  for (scheduler::Node& n : nodes) by_name[n.name] = &n;
  for (const JobRecord& r : jobs) {
    if (!HoldsNodes(r.state)) continue;
    auto spec = specs_.Get(r);
    if (!spec.ok()) continue;
    std::vector<LearnerSlot> held = r.learners;
    for (const ServerSlot& l : r.servers) held.push_back({l.node, l.pid, -1, {}, 0});
    if (auto it = leaving.find(r.id); it != leaving.end()) {
      held.insert(held.end(), it->second.begin(), it->second.end());
    }
    for (const LearnerSlot& l : held) {
      auto n = by_name.find(l.node);
      if (n == by_name.end()) continue;
      n->second->allocated += PerLearner(**spec);
      n->second->gpus_held.insert(n->second->gpus_held.end(), l.gpus.begin(), l.gpus.end());
    }
  }
  return nodes;
}

void ClusterView::SetLeaving(std::map<std::string, std::vector<LearnerSlot>> leaving) {
  absl::MutexLock lock(&mu_);
  leaving_ = std::move(leaving);
}

std::map<std::string, scheduler::TenantShare> ClusterView::Tenants() {
  std::map<std::string, scheduler::TenantShare> out;
  auto tenants = store_.ListTenants();
  if (!tenants.ok()) {
    spdlog::error("cannot read tenants: {}", tenants.status().message());
    return out;
  }
  for (const TenantRecord& t : *tenants) {
    scheduler::TenantShare& share = out[t.name];
    share.has_quota = t.has_quota;
    share.quota = {t.quota_cpus, t.quota_memory_mb, t.quota_gpus};
    share.weight = t.weight;
  }
  return out;
}

ClusterView::Round ClusterView::ForRound(const std::vector<JobRecord>& jobs,
                                         const std::map<std::string, TimeMs>& not_before,
                                         const std::map<std::string, int>& stopping, TimeMs now) {
  Round round;
  scheduler::ClusterSnapshot& snap = round.snapshot;
  snap.now_ms = now;
  snap.preemption_frees_at_once = false;  // a preempted job holds its nodes until it exits
  snap.tenants = Tenants();
  snap.nodes = Allocated(jobs);
  for (const JobRecord& r : jobs) {
    if (r.state != JobState::kQueued && !HoldsResources(r.state)) continue;
    auto spec = specs_.Get(r);
    if (!spec.ok()) {
      spdlog::error("job {} left out of scheduling: {}", r.id, spec.status().message());
      continue;
    }
    auto wait_until = not_before.find(r.id);
    if (r.state == JobState::kQueued && wait_until != not_before.end() &&
        wait_until->second > now) {
      round.held[r.id] = {r.id, scheduler::WaitCode::kRestartBackoff,
                          absl::StrFormat("waiting: restart backoff, %.1f s left",
                                          (wait_until->second - now) / 1000.0)};
      continue;
    }
    if (auto left = stopping.find(r.id); r.state == JobState::kQueued && left != stopping.end()) {
      round.held[r.id] = {
          r.id, scheduler::WaitCode::kCheckpointing,
          absl::StrCat("waiting: ", left->second, " learner", left->second == 1 ? "" : "s",
                       " of the previous attempt still writing the last "
                       "checkpoint")};
      continue;
    }
    snap.jobs.push_back(Request(r, **spec, now));
    round.jobs.emplace(r.id, r);
    const scheduler::LiveJobModel& model =
        round.models.emplace(r.id, models_.Get(r, **spec)).first->second;
    snap.jobs.back().model = &model;
    snap.jobs.back().target = TargetStateOf(r, **spec, model);
  }
  return round;
}

void ClusterView::RecordRound(double ms, int64_t active_jobs) {
  absl::MutexLock lock(&mu_);
  round_.last_ms = ms;
  round_.max_ms = std::max(round_.max_ms, ms);
  round_.active_jobs = active_jobs;
  ++round_.rounds;
}

ClusterView::RoundTime ClusterView::LastRound() const {
  absl::MutexLock lock(&mu_);
  return round_;
}

void ClusterView::SetWaiting(std::map<std::string, scheduler::Waiting> waiting) {
  absl::MutexLock lock(&mu_);
  waiting_ = std::move(waiting);
}

std::optional<scheduler::Waiting> ClusterView::WaitingFor(const std::string& id) const {
  absl::MutexLock lock(&mu_);
  auto it = waiting_.find(id);
  if (it == waiting_.end()) return std::nullopt;
  return it->second;
}

void ClusterView::Forget(const std::string& id) {
  absl::MutexLock lock(&mu_);
  waiting_.erase(id);
}

absl::StatusOr<std::vector<ClusterView::QueueEntry>> ClusterView::Queue(const std::string& tenant) {
  ASSIGN_OR_RETURN(std::vector<JobRecord> jobs, store_.ListActiveJobs());
  std::vector<QueueEntry> out;
  for (const JobRecord& r : jobs) {
    if (!InQueue(r.state) || (!tenant.empty() && r.tenant != tenant)) continue;
    QueueEntry e;
    e.job = r;
    auto spec = specs_.Get(r);
    e.priority = spec.ok() ? (*spec)->priority : 0;
    if (spec.ok()) e.estimate = models_.Get(r, **spec).NextTarget((*spec)->resources.learners);
    if (r.state == JobState::kPreempted) {
      e.waiting = {r.id, scheduler::WaitCode::kCheckpointing,
                   "preempted: checkpointing before it requeues"};
    } else {
      e.waiting = WaitingFor(r.id).value_or(scheduler::Waiting{
          r.id, scheduler::WaitCode::kNextRound, "waiting: next scheduling round"});
    }
    out.push_back(std::move(e));
  }
  std::stable_sort(out.begin(), out.end(), [](const QueueEntry& a, const QueueEntry& b) {
    return a.priority > b.priority;
  });
  return out;
}

absl::StatusOr<std::vector<ClusterView::NodeUsage>> ClusterView::Nodes() {
  ASSIGN_OR_RETURN(std::vector<JobRecord> jobs, store_.ListActiveJobs());
  std::vector<NodeUsage> out;
  for (const scheduler::Node& n : Allocated(jobs)) out.push_back({n, {}});
  for (const JobRecord& r : jobs) {
    if (!HoldsNodes(r.state)) continue;
    for (NodeUsage& u : out) {
      bool here = std::any_of(r.learners.begin(), r.learners.end(),
                              [&](const LearnerSlot& l) { return l.node == u.node.name; });
      if (here) u.jobs.push_back(r);
    }
  }
  return out;
}

absl::StatusOr<std::vector<ClusterView::TenantUsage>> ClusterView::Usage(TimeMs now_ms) {
  ASSIGN_OR_RETURN(std::vector<TenantRecord> tenants, store_.ListTenants());
  ASSIGN_OR_RETURN(std::vector<JobRecord> jobs, store_.ListActiveJobs());
  scheduler::ClusterSnapshot snap;
  snap.nodes = nodes_;
  snap.tenants = Tenants();
  for (const JobRecord& r : jobs) {
    if (!InQueue(r.state) && !HoldsResources(r.state)) continue;
    auto spec = specs_.Get(r);
    if (spec.ok()) snap.jobs.push_back(Request(r, **spec, now_ms));
  }
  std::map<std::string, scheduler::TenantShares> shares = scheduler::ComputeTenantShares(snap);
  // GPU time: what the store counts for learners that have left, and the active jobs' learners
  // up to now.
  std::map<std::string, int64_t> held_now;
  for (const JobRecord& r : jobs) held_now[r.tenant] += r.GpuMs(now_ms) - r.gpu_ms;
  std::vector<TenantUsage> out;
  for (const TenantRecord& t : tenants) {
    ASSIGN_OR_RETURN(JobStore::JobCounts counts, store_.CountJobs(t.name));
    out.push_back({t, shares[t.name], t.deleted_jobs_gpu_ms + counts.gpu_ms + held_now[t.name]});
  }
  return out;
}

}  // namespace weft
