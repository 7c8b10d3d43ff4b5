#include "train/target_tracker.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace weft::train {

TargetTracker::Decision TargetTracker::Observe(double accuracy) {
  Decision d;
  last_ = accuracy;
  best_ = std::max(best_, accuracy);
  d.deliver = WouldDeliver(accuracy);
  if (targets_.complete && accuracy >= *targets_.complete) {
    if (!complete_met_) complete_met_ = accuracy;
    d.complete = true;
  }
  return d;
}

bool TargetTracker::WouldDeliver(double accuracy) const {
  return targets_.deliver && !delivered_ && accuracy >= *targets_.deliver;
}

void TargetTracker::Restore(double best, double last, bool delivered) {
  best_ = best;
  last_ = last;
  delivered_ = delivered;
  complete_met_.reset();
}

std::string TargetTracker::FinishReason(const std::string& otherwise) const {
  if (!complete_met_) return otherwise;
  return absl::StrFormat("target met: test_accuracy %.4f >= %g", *complete_met_,
                         *targets_.complete);
}

std::string TargetTracker::BudgetReason(int epochs) const {
  if (targets_.complete) {
    return FinishReason(
        absl::StrFormat("budget exhausted, best %.4f (target %g)", best_, *targets_.complete));
  }
  return absl::StrFormat("budget exhausted: %d epochs, test_accuracy %.4f", epochs, last_);
}

}  // namespace weft::train
