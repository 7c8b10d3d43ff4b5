// ExitWatcher: hears of a process's end the moment it ends, so that whoever reaps it does so
// then rather than at its next periodic poll. A pidfd (pidfd_open(2), Linux 5.3) per watched
// process, polled by one thread of the watcher's own; a process's pidfd becomes readable once
// the process has ended (a child then waits to be reaped; the watcher never reaps it).
//
// Thread-safety: Watch and SetListener may be called from any thread; the listener runs on the
// watcher's thread, never under a lock the caller could hold when calling Watch.
#pragma once

#include <sys/types.h>

#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace weft {

class ExitWatcher {
 public:
  ExitWatcher();
  ~ExitWatcher();  // stops its thread and closes every pidfd it still holds
  ExitWatcher(const ExitWatcher&) = delete;
  ExitWatcher& operator=(const ExitWatcher&) = delete;

  // Calls `listener` (nullptr: no one) once each watched process has ended, from then on. The
  // listener is not called any more once SetListener returns with another one.
  void SetListener(std::function<void()> listener) ABSL_LOCKS_EXCLUDED(listener_mu_);
  // Watches `pid` until it ends. Returns false when it cannot (no pidfd_open, the process is
  // gone or not ours to see): the caller's next poll still finds the end, only later.
  bool Watch(pid_t pid) ABSL_LOCKS_EXCLUDED(mu_);

  // Processes watched whose end has not been heard yet (for tests).
  int Watched() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Run();

  const int wake_fd_;  // eventfd: a new pidfd to poll, or stop
  mutable absl::Mutex mu_;
  std::vector<int> added_ ABSL_GUARDED_BY(mu_);  // pidfds not yet polled by the thread
  int watched_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Mutex listener_mu_;  // held while the listener runs: SetListener waits for it
  std::function<void()> listener_ ABSL_GUARDED_BY(listener_mu_);
  std::thread thread_;
};

}  // namespace weft
