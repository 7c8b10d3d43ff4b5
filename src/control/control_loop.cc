// ControlLoop: a round every period, or sooner when woken (control/control_loop.h).
#include "control/control_loop.h"

#include "absl/time/time.h"

namespace weft {

void ControlLoop::Start() {
  thread_ = std::thread([this] {
    absl::MutexLock lock(&mu_);
    while (!stop_) {
      mu_.Unlock();
      round_();
      mu_.Lock();
      mu_.AwaitWithTimeout(absl::Condition(this, &ControlLoop::Woken),
                           absl::Milliseconds(period_ms_));
      wake_ = false;
    }
  });
}

void ControlLoop::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void ControlLoop::Wake() {
  absl::MutexLock lock(&mu_);
  wake_ = true;
}

}  // namespace weft
