// What happens to a job, written down and told: each state transition is stored first (the one
// way a state changes), then logged, counted in /metrics and published on the event feed
// (control/event_hub.h); so are a submission, progress, a committed model, why a queued job
// waits, and a deletion, each right after the store write it reports.
//
// Thread-safety: the controller calls it under its job lock, which orders the store writes and
// the events alike (a reader that takes a snapshot under that lock and then follows the feed
// from EventHub::LastSeq misses nothing and sees nothing twice). Its only state of its own, the
// waiting reasons last published, has its own mutex.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "control/event_hub.h"
#include "control/job_models.h"
#include "job/job.h"
#include "scheduler/policy.h"
#include "store/store.h"

namespace weft {

class JobRecorder {
 public:
  JobRecorder(Store& store, const Clock& clock, EventHub& events, JobModels& models)
      : store_(store), clock_(clock), events_(events), models_(models) {}
  JobRecorder(const JobRecorder&) = delete;
  JobRecorder& operator=(const JobRecorder&) = delete;

  // Moves `record` to state `to` with `reason` (its history's entry): stored as a transition
  // from its current state (Store::TransitionJob, which refuses one that lost a race), then
  // published; `record` is updated only when stored. Errors from the store.
  absl::Status Transition(JobRecord& record, JobState to, const std::string& reason);
  // Transition to FAILED; a store error is logged (the job stays as it was, and a later round
  // tries again).
  void Fail(JobRecord& record, const std::string& reason);

  // Job `id` if `attempt` is its current attempt and its state passes `accepts`: what a
  // learner's call must name. FailedPrecondition for a stale attempt or a state that does not
  // accept it; NotFound for an unknown job; Unavailable when the store cannot be read.
  absl::StatusOr<JobRecord> CurrentAttempt(const std::string& id, int64_t attempt,
                                           bool (*accepts)(JobState));

  // The "submitted" event of a job just stored.
  void Submitted(const JobRecord& record);
  // A progress event: `record`'s progress and best accuracy as just stored, with the metric
  // points that came with it.
  void Progressed(const JobRecord& record, const std::vector<MetricRecord>& points);
  // A model committed (stored already) for `record`.
  void ModelCommitted(const JobRecord& record, const ModelRecord& model);
  // The job was deleted in state `last`.
  void Deleted(const std::string& id, const std::string& tenant, JobState last)
      ABSL_LOCKS_EXCLUDED(waiting_mu_);
  // Why each queued job waits: a kWaiting event when a job's reason changed, at most one a
  // second per job; `jobs` names their tenants. Forgets the jobs no longer waiting.
  void Waiting(const std::map<std::string, scheduler::Waiting>& waiting,
               const std::vector<JobRecord>& jobs) ABSL_LOCKS_EXCLUDED(waiting_mu_);

 private:
  Store& store_;
  const Clock& clock_;
  EventHub& events_;
  JobModels& models_;

  absl::Mutex waiting_mu_;
  // The waiting reason last published per queued job, and when (unix ms).
  std::map<std::string, std::pair<std::string, TimeMs>> published_waiting_
      ABSL_GUARDED_BY(waiting_mu_);
};

}  // namespace weft
