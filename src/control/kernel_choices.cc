#include "control/kernel_choices.h"

#include "absl/status/status.h"
#include "common/files.h"
#include "common/logging.h"
#include "job/kernel_cache.h"

namespace weft {

void SeedKernelChoices(const JobLayout& layout, const std::string& tenant, const std::string& id) {
  const KernelCache tenants = KernelCache::Load(layout.TenantKernelCachePath(tenant));
  if (tenants.size() == 0) return;
  KernelCache job = KernelCache::Load(KernelCachePath(layout.LogDir(id)));
  job.PutAll(tenants);
  if (absl::Status s = job.Save(); !s.ok()) {
    spdlog::warn("job {}: its tenant's kernel choices not passed on: {}", id, s.message());
  }
}

void KeepKernelChoices(const JobLayout& layout, const std::string& tenant, const std::string& id) {
  const KernelCache job = KernelCache::Load(KernelCachePath(layout.LogDir(id)));
  if (job.size() == 0) return;
  KernelCache tenants = KernelCache::Load(layout.TenantKernelCachePath(tenant));
  if (tenants.PutAll(job) == 0) return;
  absl::Status s = MakeDirs(layout.TenantDir(tenant));
  if (s.ok()) s = tenants.Save();
  if (!s.ok()) spdlog::warn("job {}: kernel choices not kept for its tenant: {}", id, s.message());
}

}  // namespace weft
