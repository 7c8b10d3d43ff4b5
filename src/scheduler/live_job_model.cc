#include "scheduler/live_job_model.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace weft::scheduler {
namespace {

int Learners(const NodeCounts& placement) {
  return std::accumulate(placement.begin(), placement.end(), 0);
}

}  // namespace

LiveJobModel::LiveJobModel(int batch_per_learner, std::optional<double> deliver,
                           std::optional<double> complete)
    : batch_(std::max(1, batch_per_learner)), deliver_(deliver), complete_(complete) {}

void LiveJobModel::ObserveThroughput(int learners, double samples_per_s) {
  if (learners < 1 || !(samples_per_s > 0) || !std::isfinite(samples_per_s)) return;
  auto [it, fresh] = throughput_.try_emplace(learners, samples_per_s);
  if (!fresh) it->second = 0.7 * it->second + 0.3 * samples_per_s;
}

void LiveJobModel::ObserveProgress(int64_t samples, int64_t step, int64_t steps_total) {
  samples_ = std::max<int64_t>(0, samples);
  step_ = std::max<int64_t>(0, step);
  steps_total_ = std::max<int64_t>(0, steps_total);
}

void LiveJobModel::ObserveMetric(double samples, double value) {
  if (!std::isfinite(samples) || !std::isfinite(value)) return;
  if (deliver_ && !delivered_) {
    std::optional<InversePowerLaw> curve = Curve();
    std::optional<double> at = curve ? curve->SamplesToReach(*deliver_) : std::nullopt;
    if (at && !forecast_.first) {
      forecast_.first = at;
      forecast_.first_made_at = curve_.back().first;  // the fit had seen up to there
    }
    if (at) forecast_.last = at;
    if (value >= *deliver_) forecast_.actual = samples;
  }
  best_ = std::max(best_, value);
  if (deliver_ && value >= *deliver_) delivered_ = true;
  if (complete_ && value >= *complete_) completed_ = true;
  if (!(samples > 0)) return;
  curve_.emplace_back(samples, value);
  if (curve_.size() > kMaxCurvePoints) {  // keep the first point and every other one after it
    std::vector<std::pair<double, double>> thinned;
    for (size_t i = 0; i < curve_.size(); i += 2) thinned.push_back(curve_[i]);
    if (thinned.back() != curve_.back()) thinned.push_back(curve_.back());
    curve_ = std::move(thinned);
  }
  // Fitted once here, not in every copy: weftd hands each scheduling round and each queue view a
  // copy, which carries the fit with it.
  fit_.reset();
  Curve();
}

std::optional<InversePowerLaw> LiveJobModel::Curve() const {
  if (!fit_) fit_ = FitInversePowerLaw(curve_);
  return *fit_;
}

std::optional<double> LiveJobModel::SamplesToReach(double target) const {
  if (best_ >= target) return 0.0;
  std::optional<InversePowerLaw> curve = Curve();
  if (!curve) return std::nullopt;
  std::optional<double> at = curve->SamplesToReach(target);
  if (!at) return std::nullopt;
  // The fit may put the target behind the job although no evaluation reached it yet: the
  // next evaluation will tell; count one more report interval's worth as a floor.
  return std::max(*at - static_cast<double>(samples_), static_cast<double>(batch_));
}

std::optional<double> LiveJobModel::SamplesLeftInBudget() const {
  if (step_ <= 0 || steps_total_ <= 0) return std::nullopt;
  return static_cast<double>(samples_) *
         static_cast<double>(std::max<int64_t>(0, steps_total_ - step_)) /
         static_cast<double>(step_);
}

LiveJobModel::Estimate LiveJobModel::NextTarget(int learners) const {
  Estimate e;
  std::optional<double> target;
  if (deliver_ && !delivered()) {
    e.target = "deliver";
    target = deliver_;
  } else if (complete_ && !completed_) {
    e.target = "complete";
    target = complete_;
  } else {
    return e;
  }
  const double rate = Goodput({std::max(1, learners)});
  std::optional<double> need = SamplesToReach(*target);
  if (!need) {
    e.beyond_budget = Curve().has_value();  // known curve that never gets there
    return e;
  }
  if (std::optional<double> left = SamplesLeftInBudget(); left && *need > *left) {
    e.beyond_budget = true;
    return e;
  }
  if (rate > 0) e.seconds = *need / rate;
  return e;
}

double LiveJobModel::StepSecondsAt(int n) const {
  if (throughput_.empty() || n < 1) return 0;
  auto exact = throughput_.find(n);
  if (exact != throughput_.end()) return n * batch_ / exact->second;
  // The measured size nearest to n (the smaller one on a tie).
  auto nearest = throughput_.begin();
  for (auto it = throughput_.begin(); it != throughput_.end(); ++it) {
    if (std::abs(it->first - n) < std::abs(nearest->first - n)) nearest = it;
  }
  double seconds = nearest->first * batch_ / nearest->second;
  // Per-learner work is the same at every size (each keeps its batch); the allreduce costs about
  // the same at every size above one (a ring's time hardly grows with n), so only crossing
  // between one learner and several changes the step time.
  if (nearest->first == 1 && n > 1) seconds *= kDefaultSyncFactor;
  if (nearest->first > 1 && n == 1) seconds /= kDefaultSyncFactor;
  return seconds;
}

double LiveJobModel::StepSeconds(const NodeCounts& placement) const {
  return StepSecondsAt(Learners(placement));
}

double LiveJobModel::RemainingSteps() const {
  return std::max<double>(1, static_cast<double>(steps_total_ - step_));
}

double LiveJobModel::Goodput(const NodeCounts& placement) const {
  const int n = Learners(placement);
  const double seconds = StepSecondsAt(n);
  return seconds > 0 ? n * batch_ / seconds : 0;
}

double LiveJobModel::ProgressToDeliver() const {
  if (delivered()) return 0;
  std::optional<double> need = SamplesToReach(*deliver_);
  std::optional<double> left = SamplesLeftInBudget();
  if (need && (!left || *need <= *left)) return *need;
  if (left) return std::max(*left, static_cast<double>(batch_));
  return need.value_or(INFINITY);
}

}  // namespace weft::scheduler
