// Where a job's files live. weftd derives every path itself from its data directory and the job
// id; a learner knows only the directories its environment names (job/learner_contract.h) and
// derives the files inside them with the functions below, so both sides agree on one layout:
//
//   <data_dir>/jobs/<id>/spec.json                       the validated spec the learner trains from
//   <data_dir>/jobs/<id>/logs/learner-<rank>.log         each learner's stdout and stderr
//   <data_dir>/jobs/<id>/logs/audit.log                  the data audit, if on (job/audit.h)
//   <data_dir>/jobs/<id>/logs/kernels.tsv                the learners' kernel choices
//   <data_dir>/jobs/<id>/checkpoints/ckpt-<step>.pt      checkpoints (step zero-padded to 10)
//   <data_dir>/jobs/<id>/results/<kind>/model.pt         delivered and final models
//   <data_dir>/jobs/<id>/results/<kind>/model-card.json
//   <data_dir>/jobs/<id>/model/model.torchscript.pt    a tenant's TorchScript model, linked from
//                                                      its artifact at submission (MODEL_DIR)
//   <data_dir>/jobs/<id>/model/code.tar.gz             a command job's code, likewise
//   <data_dir>/jobs/<id>/data/data.pt                  a tenant's own data set (a tensor file),
//                                                      linked from its artifact at submission
//   <data_dir>/jobs/<id>/work/rank-<rank>/             a command job's working directory, made
//                                                      afresh for each attempt (WORK_DIR)
//   <data_dir>/tenants/<tenant>/kernels.tsv            the kernel choices of the tenant's jobs,
//                                                      weftd's own (job/kernel_cache.h)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace weft {

// The two models a job hands back (TRADL's two tiers).
inline constexpr char kDeliveredModel[] = "delivered";  // when targets.deliver is first met
inline constexpr char kFinalModel[] = "final";          // at the end of training
bool IsModelKind(std::string_view kind);

class JobLayout {
 public:
  explicit JobLayout(std::string data_dir) : data_dir_(std::move(data_dir)) {}

  std::string JobsDir() const;
  std::string JobDir(const std::string& id) const;
  // Where a deleted job's directory goes until it is removed: DeletedDir(tenant)/<id>, counted
  // toward the tenant's disk quota for as long as any of it is left.
  std::string DeletedDir(const std::string& tenant) const;
  std::string SpecPath(const std::string& id) const;
  std::string LogDir(const std::string& id) const;
  std::string CheckpointDir(const std::string& id) const;
  std::string ResultDir(const std::string& id) const;
  std::string LogPath(const std::string& id, int rank) const;
  // The tenant's model definition (MODEL_DIR).
  std::string DefinitionDir(const std::string& id) const;
  // The tenant's own data set (data.artifact), in format tensors: the job's DATA_DIR.
  std::string DataDir(const std::string& id) const;
  // Where a command job's learners work, each in WorkDir(WorkRoot(id), rank).
  std::string WorkRoot(const std::string& id) const;
  // weftd's files of a tenant (never a learner's): TenantDir(tenant), and in it the kernel
  // choices its jobs share.
  std::string TenantDir(const std::string& tenant) const;
  std::string TenantKernelCachePath(const std::string& tenant) const;

 private:
  std::string data_dir_;
};

// The files inside a job's directories.
std::string LearnerLogPath(const std::string& log_dir, int rank);
// Parameter server `index`'s log (a scale-out ps job's weft-ps): LOG_DIR/ps-<index>.log.
std::string ParameterServerLogPath(const std::string& log_dir, int index);
// The job's data audit (job/audit.h), kept with its logs: rank 0 of each attempt appends to it.
std::string AuditPath(const std::string& log_dir);
// The kernel each layer shape runs on, as a learner of the job timed it (job/kernel_cache.h).
std::string KernelCachePath(const std::string& log_dir);
std::string CheckpointPath(const std::string& checkpoint_dir, int64_t step);
std::string ModelDir(const std::string& result_dir, std::string_view kind);
std::string ModelPath(const std::string& result_dir, std::string_view kind);
std::string ModelCardPath(const std::string& result_dir, std::string_view kind);
std::string TorchScriptPath(const std::string& definition_dir);
std::string CodeArchivePath(const std::string& definition_dir);
// The one file of a data set in format tensors (train/dataset.h), and its path in `data_dir`.
inline constexpr char kTensorFileName[] = "data.pt";
std::string TensorFilePath(const std::string& data_dir);
std::string WorkDir(const std::string& work_root, int rank);

}  // namespace weft
