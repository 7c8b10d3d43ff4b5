#include "control/attempt_tracker.h"

namespace weft {

const AttemptTracker::Attempt* AttemptTracker::Find(const std::string& id) const {
  auto it = attempts_.find(id);
  return it == attempts_.end() ? nullptr : &it->second;
}

void AttemptTracker::Erase(const std::string& id) {
  attempts_.erase(id);
  not_before_ms_.erase(id);
}

}  // namespace weft
