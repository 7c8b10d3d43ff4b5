#include "control/attempt_tracker.h"

namespace weft {

const AttemptTracker::Attempt* AttemptTracker::Find(const std::string& id) const {
  auto it = attempts_.find(id);
  return it == attempts_.end() ? nullptr : &it->second;
}

std::map<std::string, std::vector<LearnerSlot>> AttemptTracker::Leavers() const {
  std::map<std::string, std::vector<LearnerSlot>> out;
  for (const auto& [id, attempt] : attempts_) {
    for (const auto& [learner, left] : attempt.leaving) out[id].push_back(left.first);
  }
  return out;
}

void AttemptTracker::Erase(const std::string& id) {
  attempts_.erase(id);
  not_before_ms_.erase(id);
}

}  // namespace weft
