#include "control/admission.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/ids.h"
#include "common/status_macros.h"
#include "control/datasets.h"
#include "control/images.h"
#include "control/kernel_choices.h"
#include "scheduler/policy.h"

namespace weft {
namespace {

// A submission refused for `field`: the field error, and InvalidArgument "FIELD: PROBLEM".
absl::Status Refuse(std::vector<FieldError>* errors, const std::string& field,
                    const std::string& problem) {
  errors->push_back({field, problem});
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", problem));
}

}  // namespace

absl::StatusOr<Admission::Admitted> Admission::Prepare(const std::string& manifest,
                                                       const std::string& tenant,
                                                       std::vector<FieldError>* errors) {
  ASSIGN_OR_RETURN(JobSpec spec, ParseManifest(manifest, errors));
  // A weftd whose container runtime cannot run learners says why rather than queue the job.
  RETURN_IF_ERROR(executor_.Available());
  RETURN_IF_ERROR(CheckResourceFit(spec, errors));
  RETURN_IF_ERROR(CheckDataOfSpec(spec, tenant, errors));
  if (options_.disk_quota != nullptr) RETURN_IF_ERROR(options_.disk_quota->CheckRoom(tenant, 0));
  Admitted a;
  JobRecord& r = a.record;
  const TimeMs now = clock_.NowMs();
  r.id = NewJobId(now);
  // The tenant's TorchScript model or code archive, and data set, linked into the job below.
  ASSIGN_OR_RETURN(const std::vector<JobInput> inputs, InputsOfSpec(spec, tenant, r.id, errors));
  RETURN_IF_ERROR(CheckFeasible(spec, errors));
  r.tenant = tenant;
  r.name = spec.name;
  r.state = JobState::kQueued;
  r.reason = "submitted";
  r.manifest = manifest;
  r.spec_json = SpecToJson(spec).dump(2);
  r.created_ms = now;
  r.updated_ms = now;
  r.progress.epochs_total = spec.training.epochs;
  RETURN_IF_ERROR(LayOut(r, inputs, errors));
  a.spec = std::move(spec);
  return a;
}

absl::Status Admission::CheckFeasible(const JobSpec& spec, std::vector<FieldError>* errors) const {
  scheduler::JobRequest request;
  request.learners = spec.resources.min_learners;  // an elastic job runs once its minimum fits
  request.per_learner = {spec.resources.cpus, spec.resources.memory_mb, spec.resources.gpus};
  absl::Status fits = scheduler::CheckFeasible(request, options_.nodes);
  if (fits.ok()) return fits;
  return Refuse(errors, "resources", std::string(fits.message()));
}

absl::Status Admission::LayOut(const JobRecord& r, const std::vector<JobInput>& inputs,
                               std::vector<FieldError>* errors) {
  // Files first: a job in the store always has its directory, spec and inputs. When any step
  // fails, nothing of the job stays.
  absl::Status s = env_.MakeDirs(layout_.LogDir(r.id));
  if (s.ok()) s = WriteFileAtomic(env_, layout_.SpecPath(r.id), r.spec_json + "\n");
  if (s.ok()) s = LinkInputs(inputs, errors);
  if (!s.ok()) {
    Discard(r.id);
    return s;
  }
  SeedKernelChoices(layout_, r.tenant, r.id);
  return s;
}

void Admission::Discard(const std::string& id) { env_.RemoveAll(layout_.JobDir(id)).IgnoreError(); }

absl::StatusOr<std::vector<Admission::JobInput>> Admission::InputsOfSpec(
    const JobSpec& spec, const std::string& tenant, const std::string& id,
    std::vector<FieldError>* errors) {
  std::vector<JobInput> inputs;
  const std::string model_dir = layout_.DefinitionDir(id);
  if (spec.IsCommandJob()) inputs.push_back({"code", spec.code, "", CodeArchivePath(model_dir)});
  if (spec.model.architecture == "torchscript") {
    inputs.push_back({"model.torchscript", spec.model.torchscript, "", TorchScriptPath(model_dir)});
  }
  if (!spec.data.artifact.empty()) {
    inputs.push_back(
        {"data.artifact", spec.data.artifact, "", TensorFilePath(layout_.DataDir(id))});
  }
  for (JobInput& input : inputs) {
    const std::string& name = input.artifact;
    absl::StatusOr<ArtifactRecord> a = options_.artifacts == nullptr
                                           ? absl::NotFoundError("this weftd keeps no artifacts")
                                           : options_.artifacts->Get(tenant, name);
    if (!a.ok()) {
      if (!absl::IsNotFound(a.status())) return a.status();
      const std::string problem = absl::StrCat("no artifact '", name, "' (upload it first: weft ",
                                               "artifact upload FILE --name ", name, ")");
      return Refuse(errors, input.field, problem);
    }
    input.from = options_.artifacts->PathOf(*a);
  }
  return inputs;
}

absl::Status Admission::CheckJobLimits(const std::string& tenant) {
  ASSIGN_OR_RETURN(Store::JobCounts jobs, store_.CountJobs(tenant));
  const int64_t max_total = options_.tenant_max_jobs, max_active = options_.tenant_max_active_jobs;
  if (max_total > 0 && jobs.total >= max_total) {
    return absl::FailedPreconditionError(absl::StrCat(
        "tenant '", tenant, "' has ", jobs.total, " jobs, as many as weftd keeps for a ",
        "tenant (--tenant-max-jobs); delete finished ones with weft delete JOB"));
  }
  if (max_active > 0 && jobs.active >= max_active) {
    return absl::FailedPreconditionError(absl::StrCat(
        "tenant '", tenant, "' has ", jobs.active, " jobs not yet settled, as many as weftd ",
        "takes from a tenant (--tenant-max-active-jobs); submit more once some have ended"));
  }
  return absl::OkStatus();
}

absl::Status Admission::CheckDataOfSpec(const JobSpec& spec, const std::string& tenant,
                                        std::vector<FieldError>* errors) {
  if (!spec.data.path.empty()) {
    return Refuse(errors, "data.path",
                  "is no longer accepted: name a data set the admin registered with data.dataset "
                  "(weft dataset list shows yours)");
  }
  if (!spec.image.empty()) {
    absl::Status image = options_.images != nullptr && options_.images->enabled()
                             ? options_.images->Resolve(tenant, spec.image).status()
                             : absl::NotFoundError(kNoImageEngine);
    if (!image.ok() && !absl::IsNotFound(image)) return image;
    if (!image.ok()) return Refuse(errors, "image", std::string(image.message()));
  }
  if (spec.data.dataset.empty()) return absl::OkStatus();  // data.artifact, or none at all
  absl::StatusOr<DatasetRecord> d = ResolveDataset(store_, spec.data.dataset, tenant);
  if (d.ok() || !absl::IsNotFound(d.status())) return d.status();
  return Refuse(errors, "data.dataset", std::string(d.status().message()));
}

absl::Status Admission::LinkInputs(const std::vector<JobInput>& inputs,
                                   std::vector<FieldError>* errors) {
  for (const JobInput& input : inputs) {
    RETURN_IF_ERROR(env_.MakeDirs(std::filesystem::path(input.to).parent_path().string()));
    absl::Status s = LinkOrCopyFile(env_, input.from, input.to);
    if (absl::IsNotFound(s)) {  // deleted since it was looked up
      return Refuse(errors, input.field, "the artifact was deleted meanwhile");
    }
    RETURN_IF_ERROR(s);
  }
  return absl::OkStatus();
}

}  // namespace weft
