#include "executor/job_uids.h"

#include <vector>

#include "absl/strings/str_cat.h"

namespace weft {

absl::StatusOr<uid_t> JobUids::Take(const std::string& job_id, std::optional<uid_t> adopted) {
  absl::MutexLock lock(&mu_);
  if (auto it = held_.find(job_id); it != held_.end()) {
    ++it->second.second;
    return it->second.first;
  }
  if (adopted) {
    held_[job_id] = {*adopted, 1};
    return *adopted;
  }
  std::vector<bool> taken(static_cast<size_t>(count_), false);
  for (const auto& [job, held] : held_) {
    const int64_t i = static_cast<int64_t>(held.first) - first_;
    if (i >= 0 && i < count_) taken[static_cast<size_t>(i)] = true;
  }
  for (int i = 0; i < count_; ++i) {
    if (taken[static_cast<size_t>(i)]) continue;
    const uid_t uid = first_ + static_cast<uid_t>(i);
    held_[job_id] = {uid, 1};
    return uid;
  }
  return absl::ResourceExhaustedError(
      absl::StrCat("all ", count_, " job uids from ", first_, " are held by running jobs"));
}

void JobUids::Release(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  auto it = held_.find(job_id);
  if (it != held_.end() && --it->second.second == 0) held_.erase(it);
}

}  // namespace weft
