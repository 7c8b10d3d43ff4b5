#include "sim/simulator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "scheduler/decision_check.h"
#include "scheduler/devices.h"
#include "scheduler/job_model.h"
#include "scheduler/placement.h"

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

// One job's simulated state (SIM-MODEL.md §2.3), and the model policies query (an oracle: it
// answers from the same traces the job runs on).
class SimJob : public scheduler::JobModel {
 public:
  SimJob(const WorkloadJob& spec, const AppTrace* app, JobMode mode, int total_gpus,
         double deliver_fraction)
      : spec_(spec), app_(app) {
    if (app_ == nullptr) {
      remaining_s_ = spec.duration_s;
      min_ = max_ = spec.replicas;
      return;
    }
    deliver_progress_ = app_->TargetsAt(deliver_fraction).deliver_progress;
    fixed_batch_ = spec.batch_size;
    const bool ncf = app_->name() == "ncf";
    switch (mode) {
      case JobMode::kRigid:
        min_ = max_ = spec.replicas;
        break;
      case JobMode::kElasticFixedBatch:
        min_ = 1;
        max_ = ncf ? 1 : std::max(1, spec.batch_size / app_->min_local_bsz());
        break;
      case JobMode::kAdaptive:
        min_ = 1;
        if (ncf) {  // Pollux's exception: fixed at B = 32768 on at most one GPU.
          fixed_batch_ = 32768;
          max_ = 1;
        } else {
          fixed_batch_ = 0;
          max_ = std::max(1, std::min(total_gpus, app_->max_batch_size() / app_->min_local_bsz()));
        }
        break;
    }
  }

  const WorkloadJob& spec() const { return spec_; }
  const std::vector<int>& alloc() const { return alloc_; }
  bool complete() const { return completion_s_ >= 0; }
  int min_learners() const { return min_; }
  int max_learners() const { return max_; }
  const absl::Status& error() const { return error_; }

  JobResult Result() const {
    JobResult r;
    r.name = spec_.name;
    r.app = app_ ? app_->name() : "";
    r.replicas = spec_.replicas;
    r.submit_s = spec_.submit_s;
    r.start_s = start_s_;
    r.completion_s = completion_s_;
    r.jct_s = completion_s_ >= 0 ? completion_s_ - spec_.submit_s : -1;
    r.deliver_s = deliver_s_;
    r.time_to_deliver_s = deliver_s_ >= 0 ? deliver_s_ - spec_.submit_s : -1;
    r.restarts = std::max(restarts_, 0);
    r.gpu_seconds = attained_;
    return r;
  }
  double attained() const { return attained_; }
  scheduler::TargetState target() const {
    if (app_ == nullptr) return scheduler::TargetState::kNone;
    return deliver_s_ >= 0 ? scheduler::TargetState::kDelivered
                           : scheduler::TargetState::kBeforeDeliver;
  }
  int restarts() const { return std::max(restarts_, 0); }

  // Apply a new allocation at time `now` (SIM-MODEL.md §1 "Reallocate").
  void Reallocate(std::vector<int> alloc, double now, int restart_delay_s) {
    alloc_ = std::move(alloc);
    placement_.clear();
    for (size_t i = 0; i < alloc_.size(); ++i) {
      if (i > 0 && alloc_[i] == alloc_[i - 1]) {
        ++placement_.back();
      } else {
        placement_.push_back(1);
      }
    }
    if (alloc_.empty()) return;
    if (restarts_ < 0) {
      restarts_ = 0;
      start_s_ = now;
    } else {
      ++restarts_;
    }
    restore_s_ = restart_delay_s;
    UpdateBatch();
  }

  // Advance by `seconds` under the current placement (SIM-MODEL.md §2.3).
  void Advance(double seconds, double now) {
    if (placement_.empty() || complete()) return;
    const int gpus = static_cast<int>(alloc_.size());
    double clock = now;
    double d = std::min(restore_s_, seconds);
    clock += d;
    attained_ += d * gpus;
    restore_s_ -= d;
    seconds -= d;
    if (app_ == nullptr) {  // duration job
      double run = std::min(seconds, remaining_s_);
      remaining_s_ -= run;
      attained_ += run * gpus;
      if (remaining_s_ <= 0) completion_s_ = clock + run;
      return;
    }
    while (seconds > 0 && !complete()) {
      double rate = app_->ProgressRate(placement_, cfg_, epoch_);
      if (!(rate > 0)) {
        error_ = absl::OutOfRangeError(absl::StrCat(spec_.name, ": no step time for placement ",
                                                    CanonicalPlacementId(placement_),
                                                    " at local batch ", cfg_.atomic_bsz));
        return;
      }
      double next = app_->EpochStart(epoch_ + 1);
      if (progress_ + rate * seconds < next) {
        NoteDelivery(progress_ + rate * seconds, clock, rate);
        progress_ += rate * seconds;
        clock += seconds;
        attained_ += seconds * gpus;
        seconds = 0;
      } else {
        ++epoch_;
        double delta = std::nearbyint((next - progress_) / rate);  // Python round: half to even
        if (epoch_ >= app_->max_epochs()) completion_s_ = clock + delta;
        NoteDelivery(next, clock, rate);
        progress_ = next;
        clock += delta;
        attained_ += delta * gpus;
        seconds -= delta;
      }
      UpdateBatch();
    }
  }

  // JobModel.
  double StepSeconds(const NodeCounts& placement) const override {
    if (app_ == nullptr) return 1.0 / std::max(1, Sum(placement));
    int r = Sum(placement);
    BatchConfig c = app_->FixedBatch(spec_.batch_size, r, /*force_accum_single=*/true);
    auto t = app_->Step(placement, c.atomic_bsz);
    if (!t.ok()) return INFINITY;
    return t->step_s + c.accum_steps * (t->step_s - t->sync_s);
  }
  double RemainingSteps() const override {
    if (app_ == nullptr) return std::max(1.0, remaining_s_);
    int last = app_->max_epochs() - 1;
    if (epoch_ >= last) return 1;
    return app_->Iterations(spec_.batch_size, last) - app_->Iterations(spec_.batch_size, epoch_);
  }
  double ProgressToDeliver() const override {
    return deliver_s_ >= 0 || app_ == nullptr ? 0 : std::max(0.0, deliver_progress_ - progress_);
  }
  double Goodput(const NodeCounts& placement) const override {
    int r = Sum(placement);
    if (r == 0) return 0;
    if (app_ == nullptr) return r;
    uint64_t key = (static_cast<uint64_t>(CanonicalPlacementId(placement)) << 8) |
                   static_cast<uint64_t>(epoch_);
    auto it = goodput_cache_.find(key);
    if (it != goodput_cache_.end()) return it->second;
    double rate = 0;
    if (fixed_batch_ > 0) {
      rate = app_->ProgressRate(placement, app_->FixedBatch(fixed_batch_, r, false), epoch_);
    } else {
      app_->BestBatch(placement, epoch_, &rate);
    }
    goodput_cache_.emplace(key, rate);
    return rate;
  }

 private:
  static int Sum(const NodeCounts& p) {
    int s = 0;
    for (int c : p) s += c;
    return s;
  }

  // Records when progress, going from progress_ (at `clock`) to `to` at `rate`, first reaches the
  // deliver target's.
  void NoteDelivery(double to, double clock, double rate) {
    if (deliver_s_ >= 0 || to < deliver_progress_) return;
    deliver_s_ = clock + std::max(0.0, deliver_progress_ - progress_) / rate;
  }

  void UpdateBatch() {
    if (app_ == nullptr || placement_.empty()) return;
    int r = static_cast<int>(alloc_.size());
    if (fixed_batch_ > 0) {
      cfg_ = app_->FixedBatch(fixed_batch_, r, false);
    } else {
      cfg_ = app_->BestBatch(placement_, epoch_, nullptr);
      if (cfg_.atomic_bsz == 0)
        cfg_ = app_->FixedBatch(std::max(app_->init_batch_size(), app_->min_local_bsz() * r), r,
                                false);
    }
  }

  const WorkloadJob& spec_;
  const AppTrace* app_;
  int min_ = 1, max_ = 1;
  int fixed_batch_ = 0;  // 0 = adaptive
  std::vector<int> alloc_;
  NodeCounts placement_;
  BatchConfig cfg_;
  double restore_s_ = 0;
  double progress_ = 0;
  double deliver_progress_ = 0;  // AppTrace::Targets::deliver_progress
  double deliver_s_ = -1;        // when progress_ reached it
  int epoch_ = 0;
  double remaining_s_ = 0;  // duration jobs
  double attained_ = 0;
  int restarts_ = -1;  // -1 until the first allocation
  double start_s_ = -1;
  double completion_s_ = -1;
  absl::Status error_;
  mutable std::unordered_map<uint64_t, double> goodput_cache_;
};

// One run of the simulator: the jobs, the persistent snapshot the policy sees, and the result.
// The snapshot persists across rounds: jobs enter when submitted, leave when complete, and only
// what changed is updated, so long queues cost little per round.
class Simulation {
 public:
  Simulation(const Workload& workload, scheduler::Policy& policy, const SimOptions& options)
      : workload_(workload),
        policy_(policy),
        options_(options),
        total_gpus_(options.nodes * options.gpus_per_node) {}

  absl::Status AddJobs(AppCatalog& apps, JobMode mode);
  absl::StatusOr<SimResult> Run();

 private:
  scheduler::JobRequest RequestFor(size_t i) const;
  // Completed jobs leave (their GPUs are free from this round); jobs submitted by `t` arrive.
  void LeaveAndArrive(double t);
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
  SimResult result_;
};

absl::Status Simulation::AddJobs(AppCatalog& apps, JobMode mode) {
  jobs_.reserve(workload_.jobs.size());
  for (const WorkloadJob& wj : workload_.jobs) {
    const AppTrace* app = nullptr;
    if (!workload_.duration_jobs) {
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

void Simulation::LeaveAndArrive(double t) {
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
  bool arrived = false;
  while (next_ < by_submit_.size() && workload_.jobs[by_submit_[next_]].submit_s <= t) {
    size_t i = by_submit_[next_++];
    arrived = arrived || (!active_.empty() && i < active_.back());
    active_.push_back(i);
    snap_.jobs.push_back(RequestFor(i));
  }
  if (!arrived) return;
  // A workload not sorted by time: restore workload order.
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
  for (size_t i = 0; i < jobs_.size(); ++i) {
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
  while (done_ < jobs_.size()) {
    if (active_.empty() && next_ < by_submit_.size()) {
      // Nothing runs: jump to the round before the next submission.
      double boundary = std::ceil(workload_.jobs[by_submit_[next_]].submit_s / dt) * dt - dt;
      if (boundary > t) t = boundary;
    }
    for (size_t i : active_) {
      if (jobs_[i]->alloc().empty()) continue;
      jobs_[i]->Advance(dt, t);
      if (!jobs_[i]->error().ok()) return jobs_[i]->error();
    }
    t += dt;
    LeaveAndArrive(t);
    if (active_.empty()) continue;
    if (absl::Status s = Round(t); !s.ok()) return s;
  }
  Summarize();
  return std::move(result_);
}

}  // namespace

absl::StatusOr<SimResult> Simulate(const Workload& workload, AppCatalog& apps,
                                   scheduler::Policy& policy, JobMode mode,
                                   const SimOptions& options) {
  if (options.nodes < 1 || options.gpus_per_node < 1 || options.interval_s < 1 ||
      options.restart_delay_s < 0) {
    return absl::InvalidArgumentError("nodes, gpus per node and interval must be positive");
  }
  Simulation sim(workload, policy, options);
  if (absl::Status s = sim.AddJobs(apps, mode); !s.ok()) return s;
  return sim.Run();
}

}  // namespace weft::sim
