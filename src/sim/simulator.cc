#include "sim/simulator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "scheduler/decision_check.h"
#include "scheduler/job_model.h"
#include "scheduler/placement.h"

namespace weft::sim {

using scheduler::NodeCounts;

JobMode JobModeFor(const std::string& policy) {
  if (policy == "optimus") return JobMode::kElasticFixedBatch;
  if (policy == "goodput") return JobMode::kAdaptive;
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
  SimJob(const WorkloadJob& spec, const AppTrace* app, JobMode mode, int total_gpus)
      : spec_(spec), app_(app), mode_(mode) {
    if (app_ == nullptr) {
      remaining_s_ = spec.duration_s;
      min_ = max_ = spec.replicas;
      return;
    }
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
    r.restarts = std::max(restarts_, 0);
    r.gpu_seconds = attained_;
    return r;
  }
  double attained() const { return attained_; }
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
                                                    CanonicalPlacementId(placement_), " at local batch ",
                                                    cfg_.atomic_bsz));
        return;
      }
      double next = app_->EpochStart(epoch_ + 1);
      if (progress_ + rate * seconds < next) {
        progress_ += rate * seconds;
        clock += seconds;
        attained_ += seconds * gpus;
        seconds = 0;
      } else {
        ++epoch_;
        double delta = std::nearbyint((next - progress_) / rate);  // Python round: half to even
        if (epoch_ >= app_->max_epochs()) completion_s_ = clock + delta;
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

  void UpdateBatch() {
    if (app_ == nullptr || placement_.empty()) return;
    int r = static_cast<int>(alloc_.size());
    if (fixed_batch_ > 0) {
      cfg_ = app_->FixedBatch(fixed_batch_, r, false);
    } else {
      cfg_ = app_->BestBatch(placement_, epoch_, nullptr);
      if (cfg_.atomic_bsz == 0) cfg_ = app_->FixedBatch(std::max(app_->init_batch_size(), app_->min_local_bsz() * r), r, false);
    }
  }

  const WorkloadJob& spec_;
  const AppTrace* app_;
  JobMode mode_;
  int min_ = 1, max_ = 1;
  int fixed_batch_ = 0;  // 0 = adaptive
  std::vector<int> alloc_;
  NodeCounts placement_;
  BatchConfig cfg_;
  double restore_s_ = 0;
  double progress_ = 0;
  int epoch_ = 0;
  double remaining_s_ = 0;  // duration jobs
  double attained_ = 0;
  int restarts_ = -1;  // -1 until the first allocation
  double start_s_ = -1;
  double completion_s_ = -1;
  absl::Status error_;
  mutable std::unordered_map<uint64_t, double> goodput_cache_;
};

}  // namespace

absl::StatusOr<SimResult> Simulate(const Workload& workload, AppCatalog& apps,
                                   scheduler::Policy& policy, JobMode mode,
                                   const SimOptions& options) {
  const int total_gpus = options.nodes * options.gpus_per_node;
  if (options.nodes < 1 || options.gpus_per_node < 1 || options.interval_s < 1 ||
      options.restart_delay_s < 0) {
    return absl::InvalidArgumentError("nodes, gpus per node and interval must be positive");
  }
  std::vector<std::unique_ptr<SimJob>> jobs;
  jobs.reserve(workload.jobs.size());
  for (const WorkloadJob& wj : workload.jobs) {
    const AppTrace* app = nullptr;
    if (!workload.duration_jobs) {
      auto a = apps.Get(wj.app);
      if (!a.ok()) return a.status();
      app = *a;
    }
    if (mode == JobMode::kRigid && wj.replicas > total_gpus) {
      return absl::InvalidArgumentError(absl::StrCat(workload.name, ": job ", wj.name, " asks for ",
                                                     wj.replicas, " GPUs, the cluster has ", total_gpus));
    }
    jobs.push_back(std::make_unique<SimJob>(wj, app, mode, total_gpus));
  }
  // Submission order for admission; ties keep workload order.
  std::vector<size_t> by_submit(jobs.size());
  for (size_t i = 0; i < by_submit.size(); ++i) by_submit[i] = i;
  std::stable_sort(by_submit.begin(), by_submit.end(), [&](size_t a, size_t b) {
    return workload.jobs[a].submit_s < workload.jobs[b].submit_s;
  });

  std::vector<scheduler::Node> nodes(options.nodes);
  for (int n = 0; n < options.nodes; ++n) {
    nodes[n].name = absl::StrCat("n", n);
    nodes[n].capacity.gpus = options.gpus_per_node;
  }
  std::unordered_map<std::string, int> node_index;
  for (int n = 0; n < options.nodes; ++n) node_index[nodes[n].name] = n;

  SimResult result;
  result.workload = workload.name;
  result.policy = policy.Name();
  result.total_gpus = total_gpus;
  // The snapshot persists across rounds: jobs enter when submitted, leave when complete, and
  // only what changed is updated, so long queues cost little per round.
  std::vector<size_t> active;  // indices into jobs, workload order; parallel to snap.jobs
  scheduler::ClusterSnapshot snap;
  snap.explain = false;
  snap.nodes = nodes;
  auto request_for = [&](size_t i) {
    const SimJob& j = *jobs[i];
    scheduler::JobRequest req;
    req.job_id = j.spec().name;
    req.tenant = j.spec().tenant;
    req.submitted_ms = static_cast<TimeMs>(j.spec().submit_s * 1000);
    req.learners = j.spec().replicas;
    req.min_learners = j.min_learners();
    req.max_learners = j.max_learners();
    req.per_learner.gpus = 1;
    req.model = &j;
    return req;
  };
  size_t next = 0, done = 0;
  const double dt = options.interval_s;
  double t = 0;
  std::unordered_map<std::string, std::vector<int>> changes;
  while (done < jobs.size()) {
    if (active.empty() && next < by_submit.size()) {
      // Nothing runs: jump to the round before the next submission.
      double boundary = std::ceil(workload.jobs[by_submit[next]].submit_s / dt) * dt - dt;
      if (boundary > t) t = boundary;
    }
    for (size_t i : active) {
      if (jobs[i]->alloc().empty()) continue;
      jobs[i]->Advance(dt, t);
      if (!jobs[i]->error().ok()) return jobs[i]->error();
    }
    t += dt;
    // Completed jobs leave (their GPUs are free from this round); new ones arrive.
    size_t kept = 0;
    for (size_t k = 0; k < active.size(); ++k) {
      if (jobs[active[k]]->complete()) continue;
      if (kept != k) {
        active[kept] = active[k];
        snap.jobs[kept] = std::move(snap.jobs[k]);
      }
      ++kept;
    }
    done += active.size() - kept;
    active.resize(kept);
    snap.jobs.resize(kept);
    bool arrived = false;
    while (next < by_submit.size() && workload.jobs[by_submit[next]].submit_s <= t) {
      size_t i = by_submit[next++];
      arrived = arrived || (!active.empty() && i < active.back());
      active.push_back(i);
      snap.jobs.push_back(request_for(i));
    }
    if (arrived) {  // a workload not sorted by time: restore workload order
      std::vector<size_t> order(active.size());
      for (size_t k = 0; k < order.size(); ++k) order[k] = k;
      std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return active[a] < active[b]; });
      std::vector<size_t> a2;
      std::vector<scheduler::JobRequest> j2;
      for (size_t k : order) {
        a2.push_back(active[k]);
        j2.push_back(std::move(snap.jobs[k]));
      }
      active = std::move(a2);
      snap.jobs = std::move(j2);
    }
    if (active.empty()) continue;

    snap.now_ms = static_cast<TimeMs>(t * 1000);
    for (auto& n : snap.nodes) n.allocated = {};
    for (size_t k = 0; k < active.size(); ++k) {
      const SimJob& j = *jobs[active[k]];
      if (j.alloc().empty()) continue;
      for (int n : j.alloc()) snap.nodes[n].allocated.gpus += 1;
      snap.jobs[k].attained_service = j.attained();
      snap.jobs[k].restarts = j.restarts();
    }
    auto t0 = std::chrono::steady_clock::now();
    scheduler::Decisions d = policy.Schedule(snap);
    result.policy_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++result.rounds;

    // A decision that over-commits a node or places a job it should not stops the run.
    if (absl::Status ok = scheduler::CheckDecisions(snap, d); !ok.ok()) {
      return absl::InternalError(absl::StrCat(policy.Name(), " at t=", t, ": ", ok.message()));
    }
    changes.clear();
    for (const auto& id : d.preempted) changes[id] = {};
    for (const auto& p : d.placements) {
      std::vector<int> alloc;
      for (const auto& name : p.learner_nodes) alloc.push_back(node_index.at(name));
      changes[p.job_id] = std::move(alloc);
    }
    int allocated = 0;
    for (size_t k = 0; k < active.size(); ++k) {
      SimJob& j = *jobs[active[k]];
      if (!changes.empty()) {
        auto it = changes.find(j.spec().name);
        if (it != changes.end() && it->second != j.alloc()) {
          j.Reallocate(it->second, t, options.restart_delay_s);
          auto& names = snap.jobs[k].allocation;
          names.clear();
          for (int n : j.alloc()) names.push_back(nodes[n].name);
        }
      }
      allocated += static_cast<int>(j.alloc().size());
    }
    if (result.allocated_gpus.empty() || result.allocated_gpus.back().second != allocated) {
      result.allocated_gpus.emplace_back(t, allocated);
    }
  }

  double held = 0, sum = 0;
  std::vector<double> jcts;
  for (const auto& j : jobs) {
    JobResult r = j->Result();
    result.makespan_s = std::max(result.makespan_s, r.completion_s);
    result.restarts += r.restarts;
    held += r.gpu_seconds;
    jcts.push_back(r.jct_s);
    sum += r.jct_s;
    result.jobs.push_back(std::move(r));
  }
  if (!jcts.empty()) {
    result.avg_jct_s = sum / jcts.size();
    result.p50_jct_s = Percentile(jcts, 50);
    result.p99_jct_s = Percentile(jcts, 99);
  }
  if (result.makespan_s > 0) result.gpu_utilisation = held / (total_gpus * result.makespan_s);
  return result;
}

}  // namespace weft::sim
