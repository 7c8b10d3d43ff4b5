// The JobModel weftd keeps of each job from what its rank-0 learner reports: a throughput profile
// against the number of learners (Pollux's agent profiles step time the same way as a job runs,
// Qiao et al., OSDI'21) and the job's learning curve (test accuracy against samples trained),
// fitted with an inverse power law (scheduler/learning_curve.h) to estimate the samples still
// needed to reach each target. Pure: weftd feeds it observations, policies and `weft queue` ask it.
//
// Units: progress is training samples (weft keeps each learner's batch size when the world size
// changes, so a sample is worth the same at any size; statistical efficiency is taken as 1 — weft
// does not measure the gradient noise scale Pollux uses); throughput is samples per second of
// training over all learners (the learner's `samples_per_s`, evaluation excluded); time is seconds.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "scheduler/job_model.h"
#include "scheduler/learning_curve.h"

namespace weft::scheduler {

class LiveJobModel : public JobModel {
 public:
  // Step time of n > 1 learners over one learner's at the same per-learner batch, used until the
  // job has run at both sizes: the allreduce and stragglers' waiting. 1.35 is what a 2-learner
  // CNN gang measured on these machines (1.42–1.51× one learner's throughput, issue 19).
  static constexpr double kDefaultSyncFactor = 1.35;
  // Seconds of training one in-place resize costs a job: the learners' stall while the gang
  // re-forms (docs/design.md "Elastic jobs": groups form in 15-150 ms, and a grow's step boundary
  // and newcomer wait cost the running learners under a second). Not yet measured per job.
  static constexpr double kResizeSeconds = 1.0;
  // The learning curve keeps at most this many points (older ones are thinned to every other).
  static constexpr size_t kMaxCurvePoints = 256;

  // `batch_per_learner` samples per step per learner (> 0); `deliver` and `complete` the job's
  // targets on its metric (test accuracy in [0, 1]), nullopt when it has none.
  LiveJobModel(int batch_per_learner, std::optional<double> deliver,
               std::optional<double> complete);

  // Training throughput of the whole job, `samples_per_s` > 0, measured while it ran `learners`
  // learners. Kept per size as an exponentially weighted mean (weight 0.3 for the newest).
  void ObserveThroughput(int learners, double samples_per_s);
  // Where the job stands: `samples` trained in all, `step` of `steps_total` optimizer steps.
  void ObserveProgress(int64_t samples, int64_t step, int64_t steps_total);
  // An evaluation: the metric `value` after `samples` trained. Also marks a target met once
  // `value` reaches it.
  void ObserveMetric(double samples, double value);
  // The deliver target was met (weftd records it when the delivered model is committed).
  void MarkDelivered() { delivered_ = true; }

  bool delivered() const { return delivered_ || !deliver_; }
  // Whether any throughput was observed; without it Goodput is 0 and no estimate is given.
  bool HasThroughput() const { return !throughput_.empty(); }
  size_t curve_points() const { return curve_.size(); }

  // The fitted learning curve, nullopt with fewer than 3 evaluations at distinct sample counts.
  std::optional<InversePowerLaw> Curve() const;
  // Samples the job still needs to reach `target`, from the fitted curve; 0 when an evaluation
  // already reached it; nullopt when the curve is not known yet or never reaches the target.
  std::optional<double> SamplesToReach(double target) const;
  // Samples left in its epoch budget, from its progress (samples × (steps_total − step) / step);
  // nullopt before its first step.
  std::optional<double> SamplesLeftInBudget() const;

  // Its next target (deliver until met, then complete) and the estimated seconds to it at
  // `learners` learners; nullopt seconds when unknown (no throughput or no curve yet) and
  // `beyond_budget` when the curve says the target is not reached within the epoch budget.
  struct Estimate {
    const char* target = nullptr;  // "deliver" or "complete"; nullptr: no target left
    std::optional<double> seconds;
    bool beyond_budget = false;
  };
  Estimate NextTarget(int learners) const;

  // How well the curve foresaw the delivery: the samples at which it predicted the deliver target
  // would be met, first (with the samples it had seen then) and at the last evaluation before it
  // was, against the samples at which it was. Unset parts: no fit before, or not delivered yet.
  struct DeliverForecast {
    std::optional<double> first, first_made_at, last, actual;
  };
  const DeliverForecast& deliver_forecast() const { return forecast_; }

  // --- JobModel ---
  // Seconds per step on `placement` (its learners each run `batch_per_learner`): the measured
  // step time at that many learners, else the nearest measured size's, times kDefaultSyncFactor
  // (or its inverse) when crossing between one learner and several. 0 without any throughput.
  double StepSeconds(const NodeCounts& placement) const override;
  // steps_total − step, at least 1.
  double RemainingSteps() const override;
  // Samples per second on `placement`: learners × batch_per_learner / StepSeconds.
  double Goodput(const NodeCounts& placement) const override;
  // Samples still needed for the deliver target: SamplesToReach(deliver), or, while the curve is
  // not known or does not reach it, the samples left in the epoch budget (the job delivers at
  // the latest when it ends, if at all). 0 once delivered or without a deliver target.
  double ProgressToDeliver() const override;
  // Samples left in the epoch budget (SamplesLeftInBudget), 0 before the first step.
  double RemainingProgress() const override { return SamplesLeftInBudget().value_or(0); }
  // kResizeSeconds.
  double ResizeSeconds() const override { return kResizeSeconds; }

 private:
  // Seconds per step at n learners (0 when nothing was measured).
  double StepSecondsAt(int n) const;

  int batch_;
  std::optional<double> deliver_, complete_;
  bool delivered_ = false, completed_ = false;
  std::map<int, double> throughput_;  // learners -> samples/s
  int64_t samples_ = 0, step_ = 0, steps_total_ = 0;
  double best_ = -1;
  std::vector<std::pair<double, double>> curve_;  // (samples, metric)
  // Curve(), fitted after every evaluation (so copies share the work).
  mutable std::optional<std::optional<InversePowerLaw>> fit_;
  DeliverForecast forecast_;
};

}  // namespace weft::scheduler
