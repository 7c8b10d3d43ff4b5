// Helpers shared by the controller's translation units (controller.cc: lifecycle, scheduling,
// recovery; controller_learners.cc: what learners report). Not part of the control API.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "job/job_spec.h"
#include "store/store.h"

namespace weft::control_internal {

// The job's spec as stored (canonical JSON). Internal if it does not parse: weftd wrote it.
inline absl::StatusOr<JobSpec> SpecOf(const JobRecord& r) {
  absl::StatusOr<JobSpec> spec = ParseManifest(r.spec_json);
  if (!spec.ok()) {
    return absl::InternalError(
        absl::StrCat("stored spec of job ", r.id, " does not parse: ", spec.status().message()));
  }
  return spec;
}

}  // namespace weft::control_internal
