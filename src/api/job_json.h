// JSON views of jobs for the REST API (field names are the API's contract, docs/openapi.yaml).
#pragma once

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "store/store.h"

namespace weft::api {

// The job summary used by GET /v1/jobs: id, name, tenant, state, reason, times, progress,
// latest test accuracy.
nlohmann::json JobSummaryJson(const JobRecord& job);

// The full view of GET /v1/jobs/{id}: the summary plus history, latest metrics, targets and
// whether/when each was met, models, the canonical spec, and `waiting_reason` when queued.
nlohmann::json JobDetailJson(const JobRecord& job, const std::vector<StateEvent>& history,
                             const std::vector<MetricRecord>& recent_metrics,
                             const std::vector<ArtifactRecord>& artifacts,
                             const std::string& waiting_reason);

// One metric point: step, epoch, wall_time_ms (unix ms), train_loss, samples_per_s, and
// test_accuracy / test_loss on evaluation points.
nlohmann::json MetricJson(const MetricRecord& m);

}  // namespace weft::api
