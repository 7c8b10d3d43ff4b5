#include "sim/simulator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <limits>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "scheduler/decision_check.h"
#include "scheduler/devices.h"
#include "scheduler/job_model.h"
#include "scheduler/placement.h"
#include "sim/sim_job.h"

namespace weft::sim {

using scheduler::NodeCounts;

JobMode JobModeFor(const std::string& policy) {
  if (policy == "optimus") return JobMode::kElasticFixedBatch;
  if (policy == "goodput" || policy == "targets") return JobMode::kAdaptive;
  return JobMode::kRigid;
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  double pos = q / 100.0 * (v.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - lo);
}

namespace {

// One run of the simulator: the jobs, the persistent snapshot the policy sees, and the result.
// The snapshot persists across rounds: jobs enter when submitted, leave when complete, and only
// what changed is updated, so long queues cost little per round.
// Experiments' trials are jobs too, appended to jobs_ as they start (TrialHost).
class Simulation : private TrialHost {
 public:
  Simulation(const Workload& workload, scheduler::Policy& policy, const SimOptions& options)
      : workload_(workload),
        policy_(policy),
        options_(options),
        total_gpus_(options.nodes * options.gpus_per_node) {}

  absl::Status AddJobs(AppCatalog& apps, JobMode mode);
  absl::Status AddExperiments(AppCatalog& apps, const std::vector<SimExperiment>& experiments);
  absl::StatusOr<SimResult> Run();

 private:
  // TrialHost.
  size_t StartTrial(const WorkloadJob& job, int epochs, double now) override;
  void PromoteTrial(size_t handle, int epochs, double now) override;
  bool TrialEnded(size_t handle, double* when) const override;
  double TrialGpuSeconds(size_t handle) const override { return jobs_[handle]->attained(); }
  int TrialRestarts(size_t handle) const override { return jobs_[handle]->restarts(); }

  scheduler::JobRequest RequestFor(size_t i) const;
  // Completed jobs leave (their GPUs are free from this round).
  void Leave();
  // Jobs submitted by `t` arrive, and the trials experiments started or promoted.
  void Arrive(double t);
  // The earliest submission of a workload job not yet arrived or of an experiment not done;
  // +inf if none.
  double NextSubmission() const;
  bool ExperimentsDone() const;
  // One scheduling round at time `t`: refresh the snapshot, schedule, check, apply.
  absl::Status Round(double t);
  void Summarize();

  const Workload& workload_;
  scheduler::Policy& policy_;
  const SimOptions& options_;
  const int total_gpus_;
  std::vector<std::unique_ptr<SimJob>> jobs_;
  std::vector<size_t> by_submit_;  // submission order for admission; ties keep workload order
  std::vector<scheduler::Node> nodes_;
  std::unordered_map<std::string, int> node_index_;
  std::vector<size_t> active_;  // indices into jobs_, workload order; parallel to snap_.jobs
  scheduler::ClusterSnapshot snap_;
  std::unordered_map<size_t, std::vector<std::string>> first_gpus_;  // by index into jobs_
  size_t next_ = 0, done_ = 0;
  // Experiments: their drivers, their trials' specs (stable: SimJob refers to them), the apps
  // trials run, and the trials that start or resume at the next arrival.
  std::vector<ExperimentDriver> drivers_;
  std::deque<WorkloadJob> trial_specs_;
  std::unordered_map<std::string, const AppTrace*> trial_apps_;
  JobMode mode_ = JobMode::kRigid;
  JobMode trial_mode_ = JobMode::kRigid;
  std::vector<size_t> arrivals_;
  SimResult result_;
};

absl::Status Simulation::AddJobs(AppCatalog& apps, JobMode mode) {
  mode_ = mode;
  jobs_.reserve(workload_.jobs.size());
  for (const WorkloadJob& wj : workload_.jobs) {
    const AppTrace* app = nullptr;
    if (workload_.needs_apps()) {
      auto a = apps.Get(wj.app);
      if (!a.ok()) return a.status();
      app = *a;
    }
    if (mode == JobMode::kRigid && wj.replicas > total_gpus_) {
      return absl::InvalidArgumentError(absl::StrCat(workload_.name, ": job ", wj.name,
                                                     " asks for ", wj.replicas,
                                                     " GPUs, the cluster has ", total_gpus_));
    }
    jobs_.push_back(
        std::make_unique<SimJob>(wj, app, mode, total_gpus_, options_.deliver_fraction));
  }
  by_submit_.resize(jobs_.size());
  for (size_t i = 0; i < by_submit_.size(); ++i) by_submit_[i] = i;
  std::stable_sort(by_submit_.begin(), by_submit_.end(), [&](size_t a, size_t b) {
    return workload_.jobs[a].submit_s < workload_.jobs[b].submit_s;
  });
  nodes_.resize(options_.nodes);
  for (int n = 0; n < options_.nodes; ++n) {
    nodes_[n].name = absl::StrCat("n", n);
    nodes_[n].capacity.gpus = options_.gpus_per_node;
    if (options_.gpu_devices)
      nodes_[n].gpu_devices = scheduler::CountedGpus(options_.gpus_per_node);
    node_index_[nodes_[n].name] = n;
  }
  snap_.explain = false;
  snap_.nodes = nodes_;
  result_.workload = workload_.name;
  result_.policy = policy_.Name();
  result_.total_gpus = total_gpus_;
  return absl::OkStatus();
}

absl::Status Simulation::AddExperiments(AppCatalog& apps,
                                        const std::vector<SimExperiment>& experiments) {
  // A trial's batch is what its search tries: an adaptive policy may resize it, not re-batch it.
  trial_mode_ = mode_ == JobMode::kAdaptive ? JobMode::kElasticFixedBatch : mode_;
  for (const SimExperiment& e : experiments) {
    auto app = apps.Get(e.app);
    if (!app.ok()) return app.status();
    if (trial_mode_ == JobMode::kRigid && e.gpus > total_gpus_) {
      return absl::InvalidArgumentError(absl::StrCat("experiment ", e.name, ": its trials ask for ",
                                                     e.gpus, " GPUs, the cluster has ",
                                                     total_gpus_));
    }
    auto driver = ExperimentDriver::Make(e, *app);
    if (!driver.ok()) return driver.status();
    drivers_.push_back(std::move(*driver));
    trial_apps_[e.app] = *app;
  }
  return absl::OkStatus();
}

size_t Simulation::StartTrial(const WorkloadJob& job, int epochs, double /*now*/) {
  trial_specs_.push_back(job);
  jobs_.push_back(std::make_unique<SimJob>(trial_specs_.back(), trial_apps_.at(job.app),
                                           trial_mode_, total_gpus_, options_.deliver_fraction));
  jobs_.back()->SetBudget(epochs);
  arrivals_.push_back(jobs_.size() - 1);
  return jobs_.size() - 1;
}

void Simulation::PromoteTrial(size_t handle, int epochs, double /*now*/) {
  jobs_[handle]->SetBudget(epochs);
  jobs_[handle]->Resume();
  --done_;  // it left as done; it is active again
  arrivals_.push_back(handle);
}

bool Simulation::TrialEnded(size_t handle, double* when) const {
  if (!jobs_[handle]->complete()) return false;
  *when = jobs_[handle]->completion_s();
  return true;
}

double Simulation::NextSubmission() const {
  double next = std::numeric_limits<double>::infinity();
  if (next_ < by_submit_.size()) next = workload_.jobs[by_submit_[next_]].submit_s;
  for (const ExperimentDriver& d : drivers_) {
    if (!d.done()) next = std::min(next, d.submit_s());  // one submitted goes on this round
  }
  return next;
}

bool Simulation::ExperimentsDone() const {
  for (const ExperimentDriver& d : drivers_) {
    if (!d.done()) return false;
  }
  return true;
}

scheduler::JobRequest Simulation::RequestFor(size_t i) const {
  const SimJob& j = *jobs_[i];
  scheduler::JobRequest req;
  req.job_id = j.spec().name;
  req.tenant = j.spec().tenant;
  req.submitted_ms = static_cast<TimeMs>(j.spec().submit_s * 1000);
  req.learners = j.spec().replicas;
  req.min_learners = j.min_learners();
  req.max_learners = j.max_learners();
  req.per_learner.gpus = 1;
  req.model = &j;
  req.target = j.target();
  return req;
}

void Simulation::Leave() {
  size_t kept = 0;
  for (size_t k = 0; k < active_.size(); ++k) {
    if (jobs_[active_[k]]->complete()) continue;
    if (kept != k) {
      active_[kept] = active_[k];
      snap_.jobs[kept] = std::move(snap_.jobs[k]);
    }
    ++kept;
  }
  done_ += active_.size() - kept;
  active_.resize(kept);
  snap_.jobs.resize(kept);
}

void Simulation::Arrive(double t) {
  bool arrived = false;
  auto arrive = [&](size_t i) {
    arrived = arrived || (!active_.empty() && i < active_.back());
    active_.push_back(i);
    snap_.jobs.push_back(RequestFor(i));
  };
  while (next_ < by_submit_.size() && workload_.jobs[by_submit_[next_]].submit_s <= t) {
    arrive(by_submit_[next_++]);
  }
  for (size_t i : arrivals_) arrive(i);
  arrivals_.clear();
  if (!arrived) return;
  // A workload not sorted by time, or a trial promoted: restore the order of jobs_.
  std::vector<size_t> order(active_.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return active_[a] < active_[b]; });
  std::vector<size_t> a2;
  std::vector<scheduler::JobRequest> j2;
  for (size_t k : order) {
    a2.push_back(active_[k]);
    j2.push_back(std::move(snap_.jobs[k]));
  }
  active_ = std::move(a2);
  snap_.jobs = std::move(j2);
}

absl::Status Simulation::Round(double t) {
  snap_.now_ms = static_cast<TimeMs>(t * 1000);
  for (auto& n : snap_.nodes) {
    n.allocated = {};
    n.gpus_held.clear();
  }
  for (size_t k = 0; k < active_.size(); ++k) {
    const SimJob& j = *jobs_[active_[k]];
    if (j.alloc().empty()) continue;
    for (int n : j.alloc()) snap_.nodes[n].allocated.gpus += 1;
    const auto& held = snap_.jobs[k].allocation_gpus;
    for (size_t i = 0; i < held.size() && i < j.alloc().size(); ++i) {
      auto& node = snap_.nodes[j.alloc()[i]].gpus_held;
      node.insert(node.end(), held[i].begin(), held[i].end());
    }
    snap_.jobs[k].target = j.target();
    snap_.jobs[k].attained_service = j.attained();
    snap_.jobs[k].restarts = j.restarts();
  }
  auto t0 = std::chrono::steady_clock::now();
  scheduler::Decisions d = policy_.Schedule(snap_);
  result_.policy_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++result_.rounds;
  // A decision that over-commits a node or places a job it should not stops the run.
  if (absl::Status ok = scheduler::CheckDecisions(snap_, d); !ok.ok()) {
    return absl::InternalError(absl::StrCat(policy_.Name(), " at t=", t, ": ", ok.message()));
  }
  if (options_.gpu_devices) {
    absl::Status gpus = scheduler::AssignGpus(snap_, &d);
    if (gpus.ok()) gpus = scheduler::CheckGpus(snap_, d);
    if (!gpus.ok()) {
      return absl::InternalError(absl::StrCat(policy_.Name(), " at t=", t, ": ", gpus.message()));
    }
  }
  std::unordered_map<std::string, std::vector<int>> changes;
  std::unordered_map<std::string, std::vector<std::vector<int>>> devices;
  for (const auto& id : d.preempted) changes[id] = {};
  for (const auto& p : d.placements) {
    std::vector<int> alloc;
    for (const auto& name : p.learner_nodes) alloc.push_back(node_index_.at(name));
    changes[p.job_id] = std::move(alloc);
    devices[p.job_id] = p.learner_gpus;
  }
  int allocated = 0;
  for (size_t k = 0; k < active_.size(); ++k) {
    SimJob& j = *jobs_[active_[k]];
    auto it = changes.find(j.spec().name);
    if (it != changes.end() && it->second != j.alloc()) {
      j.Reallocate(it->second, t, options_.restart_delay_s);
      auto& names = snap_.jobs[k].allocation;
      names.clear();
      for (int n : j.alloc()) names.push_back(nodes_[n].name);
      const auto& gpus = snap_.jobs[k].allocation_gpus = devices[j.spec().name];
      if (!j.alloc().empty() && !first_gpus_.count(active_[k])) {
        std::vector<std::string>& first = first_gpus_[active_[k]];
        for (size_t i = 0; i < gpus.size() && i < names.size(); ++i) {
          for (int g : gpus[i]) first.push_back(absl::StrCat(names[i], ":", g));
        }
      }
    }
    allocated += static_cast<int>(j.alloc().size());
  }
  if (result_.allocated_gpus.empty() || result_.allocated_gpus.back().second != allocated) {
    result_.allocated_gpus.emplace_back(t, allocated);
  }
  return absl::OkStatus();
}

void Simulation::Summarize() {
  double held = 0, sum = 0, deliver_sum = 0;
  int delivered = 0;
  std::vector<double> jcts;
  for (size_t i = workload_.jobs.size(); i < jobs_.size(); ++i) {
    held += jobs_[i]->attained();  // a trial's
  }
  for (const ExperimentDriver& d : drivers_) {
    result_.experiments.push_back(d.Result(*this));
    result_.makespan_s = std::max(result_.makespan_s, result_.experiments.back().completion_s);
  }
  for (size_t i = 0; i < workload_.jobs.size(); ++i) {
    const auto& j = jobs_[i];
    JobResult r = j->Result();
    if (auto it = first_gpus_.find(i); it != first_gpus_.end()) r.first_gpus = it->second;
    if (r.time_to_deliver_s >= 0) {
      deliver_sum += r.time_to_deliver_s;
      ++delivered;
    }
    result_.makespan_s = std::max(result_.makespan_s, r.completion_s);
    result_.restarts += r.restarts;
    held += r.gpu_seconds;
    jcts.push_back(r.jct_s);
    sum += r.jct_s;
    result_.jobs.push_back(std::move(r));
  }
  if (delivered > 0) result_.avg_time_to_deliver_s = deliver_sum / delivered;
  if (!jcts.empty()) {
    result_.avg_jct_s = sum / jcts.size();
    result_.p50_jct_s = Percentile(jcts, 50);
    result_.p99_jct_s = Percentile(jcts, 99);
  }
  if (result_.makespan_s > 0) {
    result_.gpu_utilisation = held / (total_gpus_ * result_.makespan_s);
  }
}

absl::StatusOr<SimResult> Simulation::Run() {
  const double dt = options_.interval_s;
  double t = 0;
  while (done_ < jobs_.size() || !ExperimentsDone()) {
    if (active_.empty() && arrivals_.empty()) {
      // Nothing runs: jump to the round before the next submission.
      const double next = NextSubmission();
      if (!std::isfinite(next)) {
        return absl::InternalError(absl::StrCat("at t=", t, ": nothing runs and nothing comes"));
      }
      double boundary = std::ceil(next / dt) * dt - dt;
      if (boundary > t) t = boundary;
    }
    for (size_t i : active_) {
      if (jobs_[i]->alloc().empty()) continue;
      jobs_[i]->Advance(dt, t);
      if (!jobs_[i]->error().ok()) return jobs_[i]->error();
    }
    t += dt;
    Leave();
    for (ExperimentDriver& d : drivers_) {
      if (d.submit_s() <= t) d.Round(t, *this);
    }
    Arrive(t);
    if (active_.empty()) continue;
    if (absl::Status s = Round(t); !s.ok()) return s;
  }
  Summarize();
  return std::move(result_);
}

}  // namespace

absl::StatusOr<SimResult> Simulate(const Workload& workload, AppCatalog& apps,
                                   scheduler::Policy& policy, JobMode mode,
                                   const SimOptions& options,
                                   const std::vector<SimExperiment>& experiments) {
  if (options.nodes < 1 || options.gpus_per_node < 1 || options.interval_s < 1 ||
      options.restart_delay_s < 0) {
    return absl::InvalidArgumentError("nodes, gpus per node and interval must be positive");
  }
  Simulation sim(workload, policy, options);
  if (absl::Status s = sim.AddJobs(apps, mode); !s.ok()) return s;
  if (absl::Status s = sim.AddExperiments(apps, experiments); !s.ok()) return s;
  return sim.Run();
}

}  // namespace weft::sim
