// What happens to jobs, as a live feed: the controller publishes an event for every state
// transition, every progress report of a job's rank 0, every model committed, every change of
// why a queued job waits, and every deletion; the experiments' controller one for every write
// of an experiment (its state, its best trial, a trial started) and its deletion; the REST API's
// server-sent-events streams (GET /v1/events, GET /v1/jobs/{id}/events) and through them `weft
// follow` and the dashboard read it. The feed is in memory and bounded: a reader that falls more
// than `capacity` events behind is told so (Batch::missed) and re-reads the job's state from the
// store. What must survive weftd (the history, the models) is in the store; this is only how
// readers hear of it without polling.
//
// Thread-safety: Publish and Wait may be called from any thread; Wait blocks only its caller.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "job/job.h"
#include "job/job_state.h"

namespace weft {

enum class JobEventType {
  kState,              // a transition: from, to, reason
  kProgress,           // rank 0 reported: progress, the new metric points, best_test_accuracy
  kModel,              // a model was committed: model
  kWaiting,            // a queued job's reason to wait changed: reason
  kDeleted,            // the job and its files were removed
  kExperiment,         // an experiment was written: experiment (its record as stored)
  kExperimentDeleted,  // an experiment and its trials were removed: experiment (as it was)
};

// The `event:` name of a type on the SSE streams: "state", "progress", "model", "waiting",
// "deleted", "experiment", "experiment_deleted".
const char* JobEventTypeName(JobEventType t);

struct JobEvent {
  int64_t seq = 0;  // assigned by Publish: 1, 2, ... in publication order, never reused
  JobEventType type = JobEventType::kState;
  std::string job;  // job id; "" for an experiment's event
  std::string tenant;
  TimeMs time_ms = 0;
  // kState
  std::optional<JobState> from;
  JobState to = JobState::kQueued;
  std::string reason;  // kState and kWaiting
  // kProgress
  JobProgress progress;
  std::vector<MetricRecord> points;
  std::optional<double> best_test_accuracy;
  // kModel
  std::optional<ModelRecord> model;
  // kExperiment, kExperimentDeleted
  std::optional<ExperimentRecord> experiment;
};

class EventHub {
 public:
  // Keeps the newest `capacity` events (≥ 1) for readers that are behind.
  explicit EventHub(size_t capacity = 8192);

  // Stamps `event` with the next sequence number, keeps it, wakes the waiting readers and
  // returns the number.
  int64_t Publish(JobEvent event);

  // The sequence number of the newest event (0 before the first): a reader that has seen the
  // state as of now reads on from here.
  int64_t LastSeq() const;

  // Which hub numbered the events: when it was made (unix milliseconds). Sequence numbers start
  // again at 1 in a new weftd, so an event is named by both (the streams' `id: RUN-SEQ`).
  int64_t run() const { return run_; }

  struct Batch {
    std::vector<JobEvent> events;  // those after the cursor that `keep` accepted, oldest first
    int64_t last = 0;              // the new cursor: the newest event looked at
    bool missed = false;           // events after the cursor were dropped before it read them
  };
  // The events after `after` that pass `keep` (null: all), waiting up to `timeout` for a newer
  // event when there is none yet (returns with no events on timeout). Events that `keep`
  // refuses still move the cursor on.
  Batch Wait(int64_t after, absl::Duration timeout,
             const std::function<bool(const JobEvent&)>& keep) const;

 private:
  const size_t capacity_;
  const int64_t run_;
  mutable absl::Mutex mu_;
  mutable absl::CondVar published_;
  std::deque<JobEvent> events_ ABSL_GUARDED_BY(mu_);  // seq from events_.front().seq, no gaps
  int64_t last_seq_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace weft
