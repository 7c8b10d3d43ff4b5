#include "control/disk_quota.h"

#include <limits>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_tree.h"
#include "common/status_macros.h"
#include "common/text.h"

namespace weft {
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

absl::StatusOr<DiskUsage> DiskQuota::MeasureLocked(const std::string& tenant) {
  ASSIGN_OR_RETURN(std::vector<JobRecord> jobs, store_.ListJobs(tenant));
  DiskUsageWalk walk({options_.max_depth, options_.max_inodes});
  if (tenant_dir_) walk.Add(tenant_dir_(tenant));
  walk.Add(layout_.DeletedDir(tenant));
  for (const JobRecord& job : jobs) walk.Add(layout_.JobDir(job.id));
  DiskUsage usage = walk.usage();
  // What its jobs take in the store: the manifest as submitted (comments and all) and its spec.
  for (const JobRecord& job : jobs) {
    usage.bytes += static_cast<int64_t>(job.manifest.size() + job.spec_json.size());
  }
  // Its own container images, as the engine keeps them (each distinct one once).
  ASSIGN_OR_RETURN(std::vector<ImageRecord> images, store_.ListImages());
  std::set<std::string> references;
  for (const ImageRecord& i : images) {
    if (i.tenant == tenant && references.insert(i.reference).second) usage.bytes += i.bytes;
  }
  measured_[tenant] = {usage, clock_.NowMs()};
  return usage;
}

absl::StatusOr<DiskUsage> DiskQuota::Usage(const std::string& tenant, int64_t max_age_ms) {
  absl::MutexLock lock(&mu_);
  auto it = measured_.find(tenant);
  if (max_age_ms > 0 && it != measured_.end() && clock_.NowMs() - it->second.at_ms <= max_age_ms) {
    return it->second.usage;
  }
  return MeasureLocked(tenant);
}

absl::StatusOr<int64_t> DiskQuota::UsedBytes(const std::string& tenant, int64_t max_age_ms) {
  ASSIGN_OR_RETURN(DiskUsage usage, Usage(tenant, max_age_ms));
  return usage.bytes;
}

void DiskQuota::Forget(const std::string& tenant) {
  absl::MutexLock lock(&mu_);
  measured_.erase(tenant);
}

std::optional<DiskQuota::Over> DiskQuota::OverBy(const std::string& tenant, const DiskUsage& used,
                                                 int64_t quota_bytes) const {
  Over over{tenant, used.bytes, quota_bytes, absl::StrJoin(used.unmeasured, "; ")};
  if (!over.unmeasured.empty() || used.bytes >= quota_bytes) return over;
  return std::nullopt;
}

absl::StatusOr<int64_t> DiskQuota::RoomBytes(const std::string& tenant) {
  ASSIGN_OR_RETURN(TenantRecord t, store_.GetTenant(tenant));
  const int64_t quota = QuotaBytes(t);
  if (quota <= 0) return std::numeric_limits<int64_t>::max();
  ASSIGN_OR_RETURN(DiskUsage used, Usage(tenant, options_.max_age_ms));
  if (!used.unmeasured.empty()) return 0;
  return std::max<int64_t>(0, quota - used.bytes);
}

absl::Status DiskQuota::CheckRoom(const std::string& tenant, int64_t more_bytes) {
  ASSIGN_OR_RETURN(TenantRecord t, store_.GetTenant(tenant));
  const int64_t quota = QuotaBytes(t);
  if (quota <= 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(DiskUsage used, Usage(tenant, options_.max_age_ms));
  std::optional<Over> over = OverBy(tenant, used, quota);
  if (!over && used.bytes + std::max<int64_t>(more_bytes, 0) < quota) return absl::OkStatus();
  if (!over) over = Over{tenant, used.bytes, quota, ""};
  return absl::ResourceExhaustedError(
      more_bytes > 0 && over->unmeasured.empty()
          ? absl::StrCat(over->Reason(), "; ", FormatMib(more_bytes), " more is over it")
          : over->Reason());
}

std::string DiskQuota::Over::Reason() const {
  constexpr char kFree[] = "free space with weft delete JOB or weft artifact delete NAME";
  if (!unmeasured.empty()) {
    return absl::StrCat("the disk usage of tenant '", tenant, "' cannot be measured (", unmeasured,
                        "), so it counts as over its ", FormatMib(quota_bytes), " disk quota; ",
                        kFree);
  }
  return absl::StrCat("tenant '", tenant, "' uses ", FormatMib(used_bytes), " of its ",
                      FormatMib(quota_bytes), " disk quota (jobs' files and artifacts); ", kFree);
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
    ASSIGN_OR_RETURN(DiskUsage used, Usage(name, /*max_age_ms=*/0));
    if (auto o = OverBy(name, used, quota)) over.push_back(std::move(*o));
  }
  return over;
}

}  // namespace weft
