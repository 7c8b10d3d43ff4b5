// EventWaker: wakes a ControlLoop (or calls any `wake`) when the event feed carries an event a
// round should act on now, rather than at the end of its period — the experiments' rounds, say,
// when a trial's job has ended its rung. A thread of its own reads the feed (EventHub::Wait).
//
// Thread-safety: Start and Stop are called by the owner, one at a time; `wake` runs on the
// waker's thread.
#pragma once

#include <atomic>
#include <functional>
#include <thread>

#include "control/event_hub.h"

namespace weft {

class EventWaker {
 public:
  // Calls `wake` once for each batch of events published from Start on that `keep` accepts, and
  // when the feed dropped events the waker had not read yet (it cannot tell what they were).
  EventWaker(const EventHub& hub, std::function<bool(const JobEvent&)> keep,
             std::function<void()> wake)
      : hub_(hub), keep_(std::move(keep)), wake_(std::move(wake)) {}
  ~EventWaker() { Stop(); }
  EventWaker(const EventWaker&) = delete;
  EventWaker& operator=(const EventWaker&) = delete;

  void Start();
  // Waits for the thread: at most kPollMs, the longest it waits on the feed at a time.
  void Stop();

  static constexpr int kPollMs = 200;

 private:
  const EventHub& hub_;
  const std::function<bool(const JobEvent&)> keep_;
  const std::function<void()> wake_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace weft
