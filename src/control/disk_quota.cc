#include "control/disk_quota.h"

#include <sys/stat.h>

#include <filesystem>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/text.h"

namespace weft {
namespace {

namespace fs = std::filesystem;

using Inode = std::pair<dev_t, ino_t>;

// Adds to `bytes` the blocks of `dir` and of everything under it whose inode is not in `seen`,
// adding each to `seen`. Does not follow symbolic links; what vanishes or cannot be read while
// walking counts as nothing (a running job prunes its checkpoints as it goes).
void AddBlocksUnder(const std::string& dir, std::set<Inode>* seen, int64_t* bytes) {
  auto add = [&](const std::string& path) {
    struct stat st {};
    if (lstat(path.c_str(), &st) != 0) return;
    if (seen->insert({st.st_dev, st.st_ino}).second) *bytes += int64_t{st.st_blocks} * 512;
  };
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(dir, ec))) return;
  add(dir);
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    add(it->path().string());
  }
}

}  // namespace

DiskQuota::DiskQuota(Store& store, JobLayout layout, TenantDir tenant_dir, const Clock& clock,
                     DiskQuotaOptions options)
    : store_(store),
      layout_(std::move(layout)),
      tenant_dir_(std::move(tenant_dir)),
      clock_(clock),
      options_(options) {}

int64_t DiskQuota::QuotaBytes(const TenantRecord& tenant) const {
  return tenant.disk_quota_mb.value_or(options_.default_quota_mb) << 20;
}

absl::StatusOr<int64_t> DiskQuota::MeasureLocked(const std::string& tenant) {
  ASSIGN_OR_RETURN(std::vector<JobRecord> jobs, store_.ListJobs(tenant));
  std::set<Inode> seen;
  int64_t bytes = 0;
  if (tenant_dir_) AddBlocksUnder(tenant_dir_(tenant), &seen, &bytes);
  for (const JobRecord& job : jobs) AddBlocksUnder(layout_.JobDir(job.id), &seen, &bytes);
  // Its own container images, as the engine keeps them (each distinct one once).
  ASSIGN_OR_RETURN(std::vector<ImageRecord> images, store_.ListImages());
  std::set<std::string> references;
  for (const ImageRecord& i : images) {
    if (i.tenant == tenant && references.insert(i.reference).second) bytes += i.bytes;
  }
  measured_[tenant] = {bytes, clock_.NowMs()};
  return bytes;
}

absl::StatusOr<int64_t> DiskQuota::UsedBytes(const std::string& tenant, int64_t max_age_ms) {
  absl::MutexLock lock(&mu_);
  auto it = measured_.find(tenant);
  if (max_age_ms > 0 && it != measured_.end() && clock_.NowMs() - it->second.at_ms <= max_age_ms) {
    return it->second.bytes;
  }
  return MeasureLocked(tenant);
}

void DiskQuota::Forget(const std::string& tenant) {
  absl::MutexLock lock(&mu_);
  measured_.erase(tenant);
}

absl::Status DiskQuota::CheckRoom(const std::string& tenant, int64_t more_bytes) {
  ASSIGN_OR_RETURN(TenantRecord t, store_.GetTenant(tenant));
  const int64_t quota = QuotaBytes(t);
  if (quota <= 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(int64_t used, UsedBytes(tenant, options_.max_age_ms));
  if (used + std::max<int64_t>(more_bytes, 0) < quota) return absl::OkStatus();
  Over over{tenant, used, quota};
  return absl::ResourceExhaustedError(
      more_bytes > 0 ? absl::StrCat(over.Reason(), "; ", FormatMib(more_bytes), " more is over it")
                     : over.Reason());
}

std::string DiskQuota::Over::Reason() const {
  return absl::StrCat("tenant '", tenant, "' uses ", FormatMib(used_bytes), " of its ",
                      FormatMib(quota_bytes),
                      " disk quota (jobs' files and artifacts); free space with weft delete JOB "
                      "or weft artifact delete NAME");
}

absl::StatusOr<std::vector<DiskQuota::Over>> DiskQuota::OverQuota(
    const std::vector<std::string>& tenants) {
  std::vector<Over> over;
  for (const std::string& name : tenants) {
    auto t = store_.GetTenant(name);
    if (absl::IsNotFound(t.status())) continue;  // deleted since
    RETURN_IF_ERROR(t.status());
    const int64_t quota = QuotaBytes(*t);
    if (quota <= 0) continue;
    ASSIGN_OR_RETURN(int64_t used, UsedBytes(name, /*max_age_ms=*/0));
    if (used >= quota) over.push_back({name, used, quota});
  }
  return over;
}

}  // namespace weft
