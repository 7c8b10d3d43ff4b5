// What each tenant's files take on disk, and the quota that bounds it (issue 12): a tenant's
// artifacts (control/artifacts.h) and its jobs' directories (job/layout.h: specs, logs,
// checkpoints, models, inputs, command jobs' working directories), each inode counted once
// however many links it has (a job's input is a link to the artifact it came from), in bytes of
// the blocks it holds (st_blocks × 512, what du reports), the files of its deleted jobs that could
// not be removed yet (JobLayout::DeletedDir), its jobs' manifests and specs as the store keeps
// them (a manifest's comments included), and its own container images (the bytes the engine
// keeps for each: control/images.h). Symbolic links are not followed; the walk cannot be hidden
// from (common/file_tree.h), and a tenant whose files cannot all be measured — an unreadable
// directory, nesting past max_depth, more than max_inodes files — counts as over its quota, with
// the reason (issue 42).
//
// The quota is enforced before the disk is full, in three places: a submission
// (Controller::Submit), a resume (Controller::Resume) and an upload (POST /v1/artifacts) of a
// tenant at or over its quota are refused with ResourceExhausted (the REST API answers 507); and
// the control loop halts the active jobs of a tenant found over its quota
// (Controller::EnforceDiskQuotas), with a reason naming the usage and the quota. A halted job
// keeps its checkpoints and resumes once the tenant has freed space (weft delete, weft artifact
// delete). The quota is soft by what a tenant's jobs write between two checks, and by the last
// checkpoint a halted learner writes.
//
// Thread-safety: safe to call from many threads; a tenant's usage is measured by one caller at a
// time and kept for `max_age_ms`, so a burst of submissions does not walk the disk each time.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/file_tree.h"
#include "job/layout.h"
#include "store/store.h"

namespace weft {

struct DiskQuotaOptions {
  // A tenant's quota when the admin set none for it (TenantRecord::disk_quota_mb), MiB; 0: no
  // quota (weftd --tenant-disk-quota-mb).
  int64_t default_quota_mb = 20480;
  // How old a measured usage may be when a submission or an upload is checked, milliseconds.
  int64_t max_age_ms = 2000;
  // Past these a tenant's files are not walked further and it counts as over its quota: one
  // directory descriptor is open per level of nesting, and a walk's time grows with the files.
  int max_depth = 128;
  int64_t max_inodes = 1'000'000;
};

class DiskQuota {
 public:
  // The directory of a tenant's files outside its jobs' directories (its artifacts:
  // Artifacts::TenantDir); it need not exist.
  using TenantDir = std::function<std::string(const std::string& tenant)>;

  // The job layout and `tenant_dir` (may be empty: nothing outside the jobs counted) name where
  // the tenant's files live; `store` says which jobs and images are whose.
  DiskQuota(Store& store, JobLayout layout, TenantDir tenant_dir, const Clock& clock,
            DiskQuotaOptions options = {});

  // The tenant's quota in bytes; 0 when it has none.
  int64_t QuotaBytes(const TenantRecord& tenant) const;

  // What the tenant's files take, measured at most `max_age_ms` ago (0: now): bytes, inodes and
  // what could not be measured. Errors from the store; files that vanish while measuring count
  // as nothing.
  absl::StatusOr<DiskUsage> Usage(const std::string& tenant, int64_t max_age_ms);
  // Usage(...).bytes.
  absl::StatusOr<int64_t> UsedBytes(const std::string& tenant, int64_t max_age_ms);

  // OK when `tenant` is below its quota with `more_bytes` added; ResourceExhausted naming its
  // usage (or what of it cannot be measured), its quota and how to free space otherwise; NotFound
  // for an unknown tenant.
  absl::Status CheckRoom(const std::string& tenant, int64_t more_bytes);

  // The bytes `tenant` may still add before it reaches its quota (0 when at or over it, or when
  // its usage cannot be measured); INT64_MAX when it has no quota. Measured at most max_age_ms
  // ago. NotFound for an unknown tenant; the store's errors. What an upload that streams without
  // a length is held to as it goes.
  absl::StatusOr<int64_t> RoomBytes(const std::string& tenant);

  // Forgets the tenant's measured usage, so the next check measures afresh: after one of its
  // jobs or artifacts is deleted.
  void Forget(const std::string& tenant);

  // A tenant found over its quota, or whose usage cannot be measured (`unmeasured`, why).
  struct Over {
    std::string tenant;
    int64_t used_bytes = 0;
    int64_t quota_bytes = 0;
    std::string unmeasured;
    std::string Reason() const;  // what a halted job's history says
  };
  // Measures now each of `tenants` and returns those over their quota.
  absl::StatusOr<std::vector<Over>> OverQuota(const std::vector<std::string>& tenants);

 private:
  absl::StatusOr<DiskUsage> MeasureLocked(const std::string& tenant)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The Over for `used` against `quota_bytes` (> 0), or none when the tenant is under it.
  std::optional<Over> OverBy(const std::string& tenant, const DiskUsage& used,
                             int64_t quota_bytes) const;

  struct Measured {
    DiskUsage usage;
    TimeMs at_ms = 0;
  };

  Store& store_;
  const JobLayout layout_;
  const TenantDir tenant_dir_;
  const Clock& clock_;
  const DiskQuotaOptions options_;
  absl::Mutex mu_;
  std::map<std::string, Measured> measured_ ABSL_GUARDED_BY(mu_);
};

}  // namespace weft
