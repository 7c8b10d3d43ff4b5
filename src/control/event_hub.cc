#include "control/event_hub.h"

#include <algorithm>

namespace weft {

const char* JobEventTypeName(JobEventType t) {
  switch (t) {
    case JobEventType::kState:
      return "state";
    case JobEventType::kProgress:
      return "progress";
    case JobEventType::kModel:
      return "model";
    case JobEventType::kWaiting:
      return "waiting";
    case JobEventType::kDeleted:
      return "deleted";
    case JobEventType::kExperiment:
      return "experiment";
    case JobEventType::kExperimentDeleted:
      return "experiment_deleted";
  }
  return "?";
}

EventHub::EventHub(size_t capacity)
    : capacity_(std::max<size_t>(capacity, 1)), run_(absl::ToUnixMillis(absl::Now())) {}

int64_t EventHub::Publish(JobEvent event) {
  absl::MutexLock lock(&mu_);
  event.seq = ++last_seq_;
  events_.push_back(std::move(event));
  if (events_.size() > capacity_) events_.pop_front();
  published_.SignalAll();
  return last_seq_;
}

int64_t EventHub::LastSeq() const {
  absl::MutexLock lock(&mu_);
  return last_seq_;
}

EventHub::Batch EventHub::Wait(int64_t after, absl::Duration timeout,
                               const std::function<bool(const JobEvent&)>& keep) const {
  const absl::Time deadline = absl::Now() + timeout;
  absl::MutexLock lock(&mu_);
  while (last_seq_ <= after) {
    if (published_.WaitWithDeadline(&mu_, deadline)) break;  // timed out
  }
  Batch batch;
  batch.last = std::max(after, last_seq_);
  if (events_.empty() || last_seq_ <= after) return batch;
  const int64_t first = events_.front().seq;
  batch.missed = after + 1 < first;
  for (size_t i = static_cast<size_t>(std::max<int64_t>(after + 1 - first, 0)); i < events_.size();
       ++i) {
    if (!keep || keep(events_[i])) batch.events.push_back(events_[i]);
  }
  return batch;
}

}  // namespace weft
