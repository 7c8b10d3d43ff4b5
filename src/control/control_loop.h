// The controller's background loop: one round every `period_ms`, or sooner when woken (a
// learner waits on a decision only a round makes), until stopped.
//
// Thread-safety: Start and Stop are called by the owner (not concurrently with each other);
// Wake may be called from any thread. The round runs on the loop's own thread, never under the
// loop's lock.
#pragma once

#include <cstdint>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace weft {

class ControlLoop {
 public:
  // `round` is called once per period (ms) from Start on.
  ControlLoop(std::function<void()> round, int64_t period_ms)
      : round_(std::move(round)), period_ms_(period_ms) {}
  ~ControlLoop() { Stop(); }
  ControlLoop(const ControlLoop&) = delete;
  ControlLoop& operator=(const ControlLoop&) = delete;

  // Starts the loop's thread (once).
  void Start() ABSL_LOCKS_EXCLUDED(mu_);
  // Stops it and waits for the round under way to end. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);
  // Asks for a round now rather than at the end of the period.
  void Wake() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  bool Woken() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || wake_; }

  const std::function<void()> round_;
  const int64_t period_ms_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;  // a round is wanted before the period ends
  std::thread thread_;
};

}  // namespace weft
