// What a submission must pass before it is a job, and the files it has before the store knows
// it: the manifest parses and fits the cluster and the executor, its data set and image resolve
// for the tenant, the artifacts it names exist, the tenant has room under its disk quota; then
// the job's directory, spec and inputs (the tenant's artifacts, linked in) are laid out. The
// Controller sequences it: Prepare, then, under the lock that serialises job creation,
// CheckJobLimits and the store's CreateJob, and Discard when that fails.
//
// Thread-safety: Prepare and Discard may run on any thread at once (each touches only its own
// job's directory); CheckJobLimits counts in one store query, and is atomic with the insert that
// follows it only under the caller's lock.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/env.h"
#include "control/controller_options.h"
#include "executor/executor.h"
#include "job/job_spec.h"
#include "job/layout.h"
#include "store/store.h"

namespace weft {

class Admission {
 public:
  // All are borrowed and must outlive it.
  Admission(Store& store, const Executor& executor, Env& env, const Clock& clock,
            const ControllerOptions& options, const JobLayout& layout)
      : store_(store),
        executor_(executor),
        env_(env),
        clock_(clock),
        options_(options),
        layout_(layout) {}

  struct Admitted {
    JobRecord record;  // QUEUED, with a new id, not yet in the store
    JobSpec spec;
  };
  // Checks `manifest` from `tenant` and lays out the new job's files. InvalidArgument with
  // `errors` filled (each field and its reason) for a manifest, data set, image, artifact or
  // resource request that cannot be a job; the executor's error when it cannot run learners
  // (Unavailable); ResourceExhausted when the tenant is at its disk quota; errors of the store
  // and the file system. On any error no file of the job is left.
  absl::StatusOr<Admitted> Prepare(const std::string& manifest, const std::string& tenant,
                                   std::vector<FieldError>* errors);
  // FailedPrecondition with the reason when `tenant` is at one of its job limits
  // (--tenant-max-jobs, --tenant-max-active-jobs); the store's errors.
  absl::Status CheckJobLimits(const std::string& tenant);
  // Removes the files Prepare laid out for job `id` (the store refused it).
  void Discard(const std::string& id);

 private:
  // One of a tenant's artifacts that a job keeps: linked at submission from `from` (the
  // artifact store) to `to` (inside the job's directory), for the manifest's `field`.
  struct JobInput {
    std::string field;     // e.g. "data.artifact"
    std::string artifact;  // its name, as the manifest gives it
    std::string from;      // the artifact's content file (Artifacts::PathOf)
    std::string to;
  };
  // The artifacts `spec` names for `tenant` (model.torchscript or a command job's code, and
  // data.artifact), each with where job `id` keeps it. InvalidArgument with `errors` filled when
  // the tenant has no such artifact; errors from the store.
  absl::StatusOr<std::vector<JobInput>> InputsOfSpec(const JobSpec& spec, const std::string& tenant,
                                                     const std::string& id,
                                                     std::vector<FieldError>* errors);
  // Refuses data.path, a data.dataset and an image that `tenant` may not use (InvalidArgument
  // naming the field, with `errors` filled); errors from the store.
  absl::Status CheckDataOfSpec(const JobSpec& spec, const std::string& tenant,
                               std::vector<FieldError>* errors);
  // InvalidArgument naming `resources` when no node set of the cluster can hold the job's
  // minimum gang.
  absl::Status CheckFeasible(const JobSpec& spec, std::vector<FieldError>* errors) const;
  // Links each of `inputs` into its job (the job keeps the content it was submitted with,
  // whatever becomes of the artifact's name). InvalidArgument naming the field when an artifact
  // was deleted meanwhile; errors of the file system.
  absl::Status LinkInputs(const std::vector<JobInput>& inputs, std::vector<FieldError>* errors);
  // The job's log directory, spec and inputs.
  absl::Status LayOut(const JobRecord& r, const std::vector<JobInput>& inputs,
                      std::vector<FieldError>* errors);

  Store& store_;
  const Executor& executor_;
  Env& env_;
  const Clock& clock_;
  const ControllerOptions& options_;
  const JobLayout& layout_;
};

}  // namespace weft
