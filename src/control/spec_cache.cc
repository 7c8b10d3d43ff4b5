#include "control/spec_cache.h"

#include "absl/strings/str_cat.h"

namespace weft {

void SpecCache::Put(const std::string& id, JobSpec spec) {
  auto ptr = std::make_shared<const JobSpec>(std::move(spec));
  absl::MutexLock lock(&mu_);
  specs_[id] = std::move(ptr);
}

absl::StatusOr<SpecCache::SpecPtr> SpecCache::Get(const JobRecord& job) {
  {
    absl::MutexLock lock(&mu_);
    if (auto it = specs_.find(job.id); it != specs_.end()) return it->second;
  }
  absl::StatusOr<JobSpec> spec = ParseManifest(job.spec_json);
  if (!spec.ok()) {
    return absl::InternalError(
        absl::StrCat("stored spec of job ", job.id, " does not parse: ", spec.status().message()));
  }
  auto ptr = std::make_shared<const JobSpec>(*std::move(spec));
  absl::MutexLock lock(&mu_);
  return specs_.emplace(job.id, std::move(ptr)).first->second;
}

void SpecCache::Erase(const std::string& id) {
  absl::MutexLock lock(&mu_);
  specs_.erase(id);
}

int SpecCache::WorldSize(const JobRecord& job) {
  if (!job.learners.empty()) return static_cast<int>(job.learners.size());
  absl::StatusOr<SpecPtr> spec = Get(job);
  return spec.ok() ? (*spec)->resources.learners : 1;
}

}  // namespace weft
