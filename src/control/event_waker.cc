// EventWaker (control/event_waker.h): the feed read on a thread of its own.
#include "control/event_waker.h"

#include "absl/time/time.h"

namespace weft {

void EventWaker::Start() {
  stop_ = false;
  // Read here, not on the thread: what is published once Start returns is news to the waker.
  thread_ = std::thread([this, cursor = hub_.LastSeq()]() mutable {
    while (!stop_) {
      EventHub::Batch batch = hub_.Wait(cursor, absl::Milliseconds(kPollMs), keep_);
      cursor = batch.last;
      if (!stop_ && (!batch.events.empty() || batch.missed)) wake_();
    }
  });
}

void EventWaker::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

}  // namespace weft
