// One job's simulated state in weft-sim: its progress against its application's traces under
// the allocations the policy gives it, and the job model the policy queries (an oracle).
// Internal to the simulator (sim/simulator.cc); one object per job of a run.
#pragma once

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "scheduler/job_model.h"
#include "scheduler/live_job_model.h"
#include "scheduler/placement.h"
#include "sim/app_trace.h"
#include "sim/simulator.h"
#include "sim/workload.h"

namespace weft::sim {

// One job's simulated state (SIM-MODEL.md §2.3), and the model policies query (an oracle: it
// answers from the same traces the job runs on).
class SimJob : public scheduler::JobModel {
 public:
  SimJob(const WorkloadJob& spec, const AppTrace* app, JobMode mode, int total_gpus,
         double deliver_fraction)
      : spec_(spec), app_(app) {
    if (app_ == nullptr && spec.learner_seconds_per_epoch > 0) {  // a live replay's job
      profiled_ = true;
      remaining_ = spec.epochs;
      deliver_progress_ = spec.deliver_epochs;
      min_ = spec.min_replicas;
      max_ = spec.replicas;
      return;
    }
    if (app_ == nullptr) {
      remaining_ = spec.duration_s;
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
  double completion_s() const { return completion_s_; }
  // A trial's budget: it completes after `epochs` epochs instead of the app's E.
  void SetBudget(int epochs) { budget_epochs_ = epochs; }
  // A trial that completed its budget goes on from where it stopped: not complete, holding
  // nothing; its next allocation is a restart (the resume from its checkpoint).
  void Resume() {
    completion_s_ = -1;
    alloc_.clear();
    placement_.clear();
  }
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
    if (app_ == nullptr && !profiled()) return scheduler::TargetState::kNone;
    return deliver_s_ >= 0 ? scheduler::TargetState::kDelivered
                           : scheduler::TargetState::kBeforeDeliver;
  }
  int restarts() const { return std::max(restarts_, 0); }

  // Apply a new allocation at time `now` (SIM-MODEL.md §1 "Reallocate"): no progress for
  // `restart_delay_s` after it, or for a profiled job its measured cost — of a start, or of an
  // in-place resize when an elastic one goes on from running learners, as weftd resizes it.
  void Reallocate(std::vector<int> alloc, double now, double restart_delay_s) {
    const bool in_place = profiled() && !alloc_.empty() && !alloc.empty() && min_ < max_;
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
    if (profiled() && in_place && spec_.resize_seconds >= 0) restore_s_ = spec_.resize_seconds;
    if (profiled() && !in_place && spec_.start_seconds >= 0) restore_s_ = spec_.start_seconds;
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
    if (app_ == nullptr) {  // a duration job (work in seconds) or a profiled one (in epochs)
      const double rate = profiled() ? ProfiledRate(gpus) : 1.0;
      const double run = std::min(seconds, remaining_ / rate);
      if (profiled()) NoteDelivery(progress_ + rate * run, clock, rate);
      progress_ += rate * run;
      remaining_ -= rate * run;
      attained_ += run * gpus;
      if (remaining_ <= 1e-9) completion_s_ = clock + run;
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
        if (epoch_ >= EndEpoch()) completion_s_ = clock + delta;
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
    if (app_ == nullptr) {
      const double r = std::max(1, Sum(placement));
      return profiled() ? 1.0 / ProfiledRate(r) : 1.0 / r;
    }
    int r = Sum(placement);
    BatchConfig c = app_->FixedBatch(spec_.batch_size, r, /*force_accum_single=*/true);
    auto t = app_->Step(placement, c.atomic_bsz);
    if (!t.ok()) return INFINITY;
    return t->step_s + c.accum_steps * (t->step_s - t->sync_s);
  }
  double RemainingSteps() const override {
    if (app_ == nullptr) return profiled() ? remaining_ : std::max(1.0, remaining_);
    int last = EndEpoch() - 1;
    if (epoch_ >= last) return 1;
    return app_->Iterations(spec_.batch_size, last) - app_->Iterations(spec_.batch_size, epoch_);
  }
  double ProgressToDeliver() const override {
    return deliver_s_ >= 0 || (app_ == nullptr && !profiled())
               ? 0
               : std::max(0.0, deliver_progress_ - progress_);
  }
  // A profiled job answers what a live job's model does (scheduler::LiveJobModel), so that goodput
  // and targets weigh a resize as weftd does: its epochs left and weftd's resize cost.
  double RemainingProgress() const override { return profiled() ? remaining_ : 0; }
  double ResizeSeconds() const override {
    return profiled() ? scheduler::LiveJobModel::kResizeSeconds : 0;
  }
  double Goodput(const NodeCounts& placement) const override {
    int r = Sum(placement);
    if (r == 0) return 0;
    if (app_ == nullptr) return profiled() ? ProfiledRate(r) : r;
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
  bool profiled() const { return profiled_; }
  // A profiled job's epochs per second on `learners` learners, as its profile measured them.
  double ProfiledRate(int learners) const {
    return learners / spec_.LearnerSecondsPerEpoch(learners);
  }
  int EndEpoch() const {
    return budget_epochs_ > 0 ? std::min(budget_epochs_, app_->max_epochs()) : app_->max_epochs();
  }
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
  int budget_epochs_ = 0;  // 0: the app's E
  double remaining_ = 0;   // duration jobs: seconds; profiled jobs: epochs
  bool profiled_ = false;  // a live replay's job: spec_'s learner-seconds per epoch
  double attained_ = 0;
  int restarts_ = -1;  // -1 until the first allocation
  double start_s_ = -1;
  double completion_s_ = -1;
  absl::Status error_;
  mutable std::unordered_map<uint64_t, double> goodput_cache_;
};

}  // namespace weft::sim
