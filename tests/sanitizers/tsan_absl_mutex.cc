// Makes absl::Mutex (and absl::CondVar's waits on one) visible to ThreadSanitizer in
// `scripts/test.sh --sanitize thread`.
//
// Debian's abseil is not built with TSan, so TSan cannot see that absl::Mutex orders the critical
// sections it guards (abseil's lock is its own futex code, not pthreads), and reports every
// ABSL_GUARDED_BY member read in one thread and written in another as a data race. In a TSan
// build the linker routes our calls to these Mutex members here (-Wl,--wrap, CMakeLists.txt),
// and each tells TSan the happens-before edge the lock makes: release before it is let go,
// acquire once it is held again. Not a lock model (no lock-order checks), only the edges.
#include <sanitizer/tsan_interface.h>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

extern "C" {
void __real__ZN4absl7debian35Mutex4LockEv(absl::Mutex* mu);
void __real__ZN4absl7debian35Mutex6UnlockEv(absl::Mutex* mu);
void __real__ZN4absl7debian35Mutex10ReaderLockEv(absl::Mutex* mu);
void __real__ZN4absl7debian35Mutex12ReaderUnlockEv(absl::Mutex* mu);
bool __real__ZN4absl7debian35Mutex7TryLockEv(absl::Mutex* mu);
void __real__ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE(absl::Mutex* mu,
                                                           const absl::Condition& cond);
bool __real__ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE(
    absl::Mutex* mu, const absl::Condition& cond, absl::Duration timeout);
void __real__ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE(absl::Mutex* mu,
                                                              const absl::Condition& cond);
void __real__ZN4absl7debian37CondVar4WaitEPNS0_5MutexE(absl::CondVar* cv, absl::Mutex* mu);
bool __real__ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE(
    absl::CondVar* cv, absl::Mutex* mu, absl::Duration timeout);
bool __real__ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE(absl::CondVar* cv,
                                                                              absl::Mutex* mu,
                                                                              absl::Time deadline);

void __wrap__ZN4absl7debian35Mutex4LockEv(absl::Mutex* mu) {
  __real__ZN4absl7debian35Mutex4LockEv(mu);
  __tsan_acquire(mu);
}
void __wrap__ZN4absl7debian35Mutex6UnlockEv(absl::Mutex* mu) {
  __tsan_release(mu);
  __real__ZN4absl7debian35Mutex6UnlockEv(mu);
}
void __wrap__ZN4absl7debian35Mutex10ReaderLockEv(absl::Mutex* mu) {
  __real__ZN4absl7debian35Mutex10ReaderLockEv(mu);
  __tsan_acquire(mu);
}
void __wrap__ZN4absl7debian35Mutex12ReaderUnlockEv(absl::Mutex* mu) {
  __tsan_release(mu);
  __real__ZN4absl7debian35Mutex12ReaderUnlockEv(mu);
}
bool __wrap__ZN4absl7debian35Mutex7TryLockEv(absl::Mutex* mu) {
  const bool held = __real__ZN4absl7debian35Mutex7TryLockEv(mu);
  if (held) __tsan_acquire(mu);
  return held;
}
// Await lets the lock go while it waits and holds it again when it returns.
void __wrap__ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE(absl::Mutex* mu,
                                                           const absl::Condition& cond) {
  __tsan_release(mu);
  __real__ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE(mu, cond);
  __tsan_acquire(mu);
}
bool __wrap__ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE(
    absl::Mutex* mu, const absl::Condition& cond, absl::Duration timeout) {
  __tsan_release(mu);
  const bool met = __real__ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE(
      mu, cond, timeout);
  __tsan_acquire(mu);
  return met;
}
void __wrap__ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE(absl::Mutex* mu,
                                                              const absl::Condition& cond) {
  __real__ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE(mu, cond);
  __tsan_acquire(mu);
}
// A CondVar's wait lets its Mutex go while it waits and holds it again when it returns, as
// Await does.
void __wrap__ZN4absl7debian37CondVar4WaitEPNS0_5MutexE(absl::CondVar* cv, absl::Mutex* mu) {
  __tsan_release(mu);
  __real__ZN4absl7debian37CondVar4WaitEPNS0_5MutexE(cv, mu);
  __tsan_acquire(mu);
}
bool __wrap__ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE(
    absl::CondVar* cv, absl::Mutex* mu, absl::Duration timeout) {
  __tsan_release(mu);
  const bool timed_out =
      __real__ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE(cv, mu, timeout);
  __tsan_acquire(mu);
  return timed_out;
}
bool __wrap__ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE(absl::CondVar* cv,
                                                                              absl::Mutex* mu,
                                                                              absl::Time deadline) {
  __tsan_release(mu);
  const bool timed_out =
      __real__ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE(cv, mu, deadline);
  __tsan_acquire(mu);
  return timed_out;
}
}
