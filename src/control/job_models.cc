#include "control/job_models.h"

#include <algorithm>

#include "common/logging.h"

namespace weft {
namespace {

int WorldOf(const JobRecord& job, const JobSpec& spec) {
  return job.learners.empty() ? spec.resources.learners : static_cast<int>(job.learners.size());
}

// The samples trained at `point`: `progress`'s, less the steps since at `world` learners.
double SamplesAt(const MetricRecord& point, const JobProgress& progress, int batch, int world) {
  const int64_t steps_since = std::max<int64_t>(0, progress.step - point.step);
  return static_cast<double>(progress.samples) -
         static_cast<double>(steps_since) * batch * std::max(1, world);
}

void Feed(scheduler::LiveJobModel& m, const std::vector<MetricRecord>& points,
          const JobProgress& progress, int batch, int world) {
  for (const MetricRecord& p : points) {
    if (p.samples_per_s > 0) {
      m.ObserveThroughput(p.world_size > 0 ? p.world_size : world, p.samples_per_s);
    }
    if (p.test_accuracy) m.ObserveMetric(SamplesAt(p, progress, batch, world), *p.test_accuracy);
  }
  if (progress.steps_total > 0)
    m.ObserveProgress(progress.samples, progress.step, progress.steps_total);
}

}  // namespace

scheduler::LiveJobModel& JobModels::EnsureLocked(const JobRecord& job, const JobSpec& spec) {
  auto it = models_.find(job.id);
  if (it != models_.end()) return it->second;
  scheduler::LiveJobModel m(spec.training.batch_size, spec.targets.deliver, spec.targets.complete);
  if (job.deliver_met_ms) m.MarkDelivered();
  if (job.attempt > 0) {  // it has run: rebuild from what it reported
    absl::StatusOr<Store::MetricPage> page = store_.MetricRange(job.id, -1, kRebuildPoints);
    if (page.ok()) {
      JobProgress at_last = job.progress;
      if (!page->points.empty()) at_last.step = std::max(at_last.step, page->points.back().step);
      Feed(m, page->points, at_last, spec.training.batch_size, WorldOf(job, spec));
    } else {
      spdlog::warn("job {}: no metrics for its model: {}", job.id, page.status().message());
    }
  }
  return models_.emplace(job.id, std::move(m)).first->second;
}

void JobModels::Observe(const JobRecord& job, const JobSpec& spec,
                        const std::vector<MetricRecord>& points, const JobProgress& progress) {
  absl::MutexLock lock(&mu_);
  scheduler::LiveJobModel& m = EnsureLocked(job, spec);
  const bool before = !m.delivered();
  Feed(m, points, progress, spec.training.batch_size, WorldOf(job, spec));
  const scheduler::LiveJobModel::DeliverForecast& f = m.deliver_forecast();
  if (before && m.delivered() && f.actual && f.first) {
    // How far ahead the learning curve saw it (docs/design.md quotes these lines).
    spdlog::info(
        "job {}: deliver target met after {:.0f} samples; the learning curve predicted {:.0f} "
        "({:+.0f} %) first, after {:.0f} samples, and {:.0f} ({:+.0f} %) at the evaluation before",
        job.id, *f.actual, *f.first, 100 * (*f.first / *f.actual - 1), f.first_made_at.value_or(0),
        f.last.value_or(0), 100 * (f.last.value_or(0) / *f.actual - 1));
  }
}

void JobModels::MarkDelivered(const std::string& id) {
  absl::MutexLock lock(&mu_);
  if (auto it = models_.find(id); it != models_.end()) it->second.MarkDelivered();
}

scheduler::LiveJobModel JobModels::Get(const JobRecord& job, const JobSpec& spec) {
  absl::MutexLock lock(&mu_);
  return EnsureLocked(job, spec);
}

void JobModels::Forget(const std::string& id) {
  absl::MutexLock lock(&mu_);
  models_.erase(id);
}

scheduler::TargetState TargetStateOf(const JobRecord& job, const JobSpec& spec,
                                     const scheduler::LiveJobModel& model) {
  if (!spec.targets.deliver) return scheduler::TargetState::kNone;
  if (job.deliver_met_ms || model.delivered()) return scheduler::TargetState::kDelivered;
  return scheduler::TargetState::kBeforeDeliver;
}

}  // namespace weft
