#include "job/layout.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace weft {

bool IsModelKind(std::string_view kind) { return kind == kDeliveredModel || kind == kFinalModel; }

std::string JobLayout::JobsDir() const { return data_dir_ + "/jobs"; }
std::string JobLayout::JobDir(const std::string& id) const {
  return absl::StrCat(data_dir_, "/jobs/", id);
}
std::string JobLayout::TenantDir(const std::string& tenant) const {
  return absl::StrCat(data_dir_, "/tenants/", tenant);
}
std::string JobLayout::TenantKernelCachePath(const std::string& tenant) const {
  return KernelCachePath(TenantDir(tenant));
}
std::string JobLayout::DeletedDir(const std::string& tenant) const {
  return absl::StrCat(data_dir_, "/deleted/", tenant);
}
std::string JobLayout::SpecPath(const std::string& id) const { return JobDir(id) + "/spec.json"; }
std::string JobLayout::LogDir(const std::string& id) const { return JobDir(id) + "/logs"; }
std::string JobLayout::CheckpointDir(const std::string& id) const {
  return JobDir(id) + "/checkpoints";
}
std::string JobLayout::ResultDir(const std::string& id) const { return JobDir(id) + "/results"; }
std::string JobLayout::LogPath(const std::string& id, int rank) const {
  return LearnerLogPath(LogDir(id), rank);
}

std::string JobLayout::DefinitionDir(const std::string& id) const { return JobDir(id) + "/model"; }

std::string JobLayout::DataDir(const std::string& id) const { return JobDir(id) + "/data"; }

std::string JobLayout::WorkRoot(const std::string& id) const { return JobDir(id) + "/work"; }

std::string TorchScriptPath(const std::string& definition_dir) {
  return definition_dir + "/model.torchscript.pt";
}
std::string CodeArchivePath(const std::string& definition_dir) {
  return definition_dir + "/code.tar.gz";
}
std::string TensorFilePath(const std::string& data_dir) {
  return absl::StrCat(data_dir, "/", kTensorFileName);
}
std::string WorkDir(const std::string& work_root, int rank) {
  return absl::StrCat(work_root, "/rank-", rank);
}
std::string LearnerLogPath(const std::string& log_dir, int rank) {
  return absl::StrCat(log_dir, "/learner-", rank, ".log");
}
std::string ParameterServerLogPath(const std::string& log_dir, int index) {
  return absl::StrCat(log_dir, "/ps-", index, ".log");
}
std::string AuditPath(const std::string& log_dir) { return log_dir + "/audit.log"; }
std::string KernelCachePath(const std::string& log_dir) { return log_dir + "/kernels.tsv"; }
std::string CheckpointPath(const std::string& checkpoint_dir, int64_t step) {
  return absl::StrFormat("%s/ckpt-%010d.pt", checkpoint_dir, step);
}
std::string ModelDir(const std::string& result_dir, std::string_view kind) {
  return absl::StrCat(result_dir, "/", std::string(kind));
}
std::string ModelPath(const std::string& result_dir, std::string_view kind) {
  return ModelDir(result_dir, kind) + "/model.pt";
}
std::string ModelCardPath(const std::string& result_dir, std::string_view kind) {
  return ModelDir(result_dir, kind) + "/model-card.json";
}

}  // namespace weft
