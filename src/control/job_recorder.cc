// JobRecorder: a job's transitions and events, stored first, then told (control/job_recorder.h).
#include "control/job_recorder.h"

#include "absl/strings/str_cat.h"
#include "common/failpoint.h"
#include "common/logging.h"
#include "common/metrics.h"
#include "common/status_macros.h"
#include "control/controller_options.h"

namespace weft {
namespace {

// An event of `type` about `job`, at `time_ms` (unix ms), with the job's state now.
JobEvent EventOf(JobEventType type, const JobRecord& job, TimeMs time_ms) {
  JobEvent e;
  e.type = type;
  e.job = job.id;
  e.tenant = job.tenant;
  e.time_ms = time_ms;
  e.to = job.state;
  return e;
}

}  // namespace

absl::Status JobRecorder::Transition(JobRecord& record, JobState to, const std::string& reason) {
  const JobState from = record.state;
  JobRecord next = record;
  next.state = to;
  next.reason = reason;
  next.updated_ms = clock_.NowMs();
  RETURN_IF_ERROR(store_.TransitionJob(next, from));
  Failpoint("after-transition");
  spdlog::info("job {}: {} -> {} ({})", record.id, JobStateName(from), JobStateName(to), reason);
  MetricsRegistry::Global().Add(kTransitionsMetric,
                                {{"tenant", record.tenant}, {"state", JobStateName(to)}});
  JobEvent e = EventOf(JobEventType::kState, next, next.updated_ms);
  e.from = from;
  e.reason = reason;
  events_.Publish(std::move(e));
  if (IsTerminal(to)) models_.Forget(record.id);
  record = std::move(next);
  return absl::OkStatus();
}

void JobRecorder::Fail(JobRecord& record, const std::string& reason) {
  absl::Status s = Transition(record, JobState::kFailed, reason);
  if (!s.ok()) spdlog::error("job {}: cannot record failure: {}", record.id, s.message());
}

absl::StatusOr<JobRecord> JobRecorder::CurrentAttempt(const std::string& id, int64_t attempt,
                                                      bool (*accepts)(JobState)) {
  ASSIGN_OR_RETURN(JobRecord r, store_.GetJob(id));
  if (r.attempt != attempt) {
    return absl::FailedPreconditionError(
        absl::StrCat("attempt ", attempt, " is stale; the job is at attempt ", r.attempt));
  }
  if (!accepts(r.state)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job is ", JobStateName(r.state), ", not running"));
  }
  return r;
}

void JobRecorder::Submitted(const JobRecord& record) {
  JobEvent e = EventOf(JobEventType::kState, record, record.created_ms);
  e.reason = "submitted";
  events_.Publish(std::move(e));
}

void JobRecorder::Progressed(const JobRecord& record, const std::vector<MetricRecord>& points) {
  JobEvent e = EventOf(JobEventType::kProgress, record, clock_.NowMs());
  e.progress = record.progress;
  e.points = points;
  e.best_test_accuracy = record.best_test_accuracy;
  events_.Publish(std::move(e));
}

void JobRecorder::ModelCommitted(const JobRecord& record, const ModelRecord& model) {
  MetricsRegistry::Global().Add(kModelsMetric, {{"tenant", record.tenant}, {"kind", model.kind}});
  JobEvent e = EventOf(JobEventType::kModel, record, model.created_ms);
  e.model = model;
  events_.Publish(std::move(e));
}

void JobRecorder::Deleted(const std::string& id, const std::string& tenant, JobState last) {
  {
    absl::MutexLock lock(&waiting_mu_);
    published_waiting_.erase(id);
  }
  JobEvent e;
  e.type = JobEventType::kDeleted;
  e.job = id;
  e.tenant = tenant;
  e.to = last;
  e.time_ms = clock_.NowMs();
  events_.Publish(std::move(e));
}

void JobRecorder::Waiting(const std::map<std::string, scheduler::Waiting>& waiting,
                          const std::vector<JobRecord>& jobs) {
  const TimeMs now = clock_.NowMs();
  absl::MutexLock lock(&waiting_mu_);
  for (auto it = published_waiting_.begin(); it != published_waiting_.end();) {
    it = waiting.count(it->first) > 0 ? std::next(it) : published_waiting_.erase(it);
  }
  for (const JobRecord& r : jobs) {
    auto w = waiting.find(r.id);
    if (w == waiting.end()) continue;
    auto [known, fresh] = published_waiting_.try_emplace(r.id);
    auto& [reason, at] = known->second;
    if (!fresh && (reason == w->second.reason || now - at < 1000)) continue;
    reason = w->second.reason;
    at = now;
    JobEvent e = EventOf(JobEventType::kWaiting, r, now);
    e.reason = w->second.reason;
    events_.Publish(std::move(e));
  }
}

}  // namespace weft
