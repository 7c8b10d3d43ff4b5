// JSON views of jobs for the REST API (field names are the API's contract, docs/openapi.yaml).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "control/event_hub.h"
#include "job/job.h"
#include "job/job_spec.h"
#include "nlohmann/json.hpp"
#include "scheduler/cluster.h"

namespace weft::api {

// An optional time as the API writes times (RFC 3339, UTC, milliseconds), or null.
nlohmann::json TimeJson(std::optional<TimeMs> t);
// An optional number, or null.
nlohmann::json OptionalJson(const std::optional<double>& v);

// The job summary used by GET /v1/jobs: id, name, tenant, state, reason, times, attempt,
// learners (with their GPUs), progress, best test accuracy, the GPU-seconds its learners have
// held up to `now_ms` (unix ms), `waiting_code` / `waiting_reason` while it waits, and
// `experiment` / `trial` for an experiment's trial.
nlohmann::json JobSummaryJson(const JobRecord& job,
                              const std::optional<scheduler::Waiting>& waiting, TimeMs now_ms);

// Everything GET /v1/jobs/{id} shows. Borrowed for the call.
struct JobDetail {
  const JobRecord& job;
  const JobSpec& spec;
  const std::vector<StateEvent>& history;
  const std::vector<MetricRecord>& recent_metrics;
  const std::vector<ModelRecord>& models;
  std::optional<scheduler::Waiting> waiting;
  TimeMs now_ms = 0;  // what its GPU-seconds are counted up to (unix ms)
};

// The full view of GET /v1/jobs/{id}: the summary plus history, latest metrics, targets and
// whether/when each was met, models, and the canonical spec.
nlohmann::json JobDetailJson(const JobDetail& detail);

// {"cpus", "memory_mb", "gpus"}.
nlohmann::json ResourcesJson(const scheduler::Resources& r);

// One metric point: step, epoch, wall_time_ms (unix ms), train_loss, samples_per_s, and
// test_accuracy / test_loss on evaluation points.
nlohmann::json MetricJson(const MetricRecord& m);

// The `data:` of an event on the SSE streams (docs/openapi.yaml, JobEvent): always "job",
// "tenant", "time" and "state" (the job's state as of the event; for "deleted" the last one
// known), then by type: "state" adds "from" and "reason"; "progress" adds "progress" (as in the
// job summary), "metrics" (the points this report added, as MetricJson) and
// "best_test_accuracy"; "model" adds "model" {kind, test_accuracy, epoch, step, bytes,
// download}; "waiting" adds "reason". An experiment's events ("experiment", "experiment_deleted")
// are {"experiment" (ExperimentSummaryJson), "tenant", "time"} instead.
nlohmann::json EventJson(const JobEvent& event);

// An experiment as GET /v1/experiments lists it: what it is, where it stands, its best and
// delivered trials.
nlohmann::json ExperimentSummaryJson(const ExperimentRecord& e);

}  // namespace weft::api
