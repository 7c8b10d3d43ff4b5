// Rate limits: one token bucket per key (the classic token-bucket shaper, as in RFC 2697's
// committed rate and burst), refilled at `requests_per_second` up to `burst`. The REST API keys
// them by tenant — a request takes one token, an empty bucket answers 429 with Retry-After, so one
// tenant's client retrying in a loop cannot starve the others or the control plane that shares
// weftd's threads — and the coordinator by job, for the metric points a learner reports (a
// tenant's program printing metric lines in a loop cannot fill the store or hold the controller).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "common/clock.h"

namespace weft {

struct RateLimit {
  double requests_per_second = 0;  // sustained rate per key, tokens/s; 0 turns limiting off
  double burst = 0;                // bucket size in tokens; at least 1 when limiting
};

class RateLimiter {
 public:
  RateLimiter(RateLimit limit, const Clock& clock) : limit_(limit), clock_(clock) {}

  // Takes one token from `key`'s bucket. 0 when the request may go on; otherwise the
  // milliseconds until the bucket holds a whole token again (> 0), and nothing is taken.
  int64_t Acquire(const std::string& key) ABSL_LOCKS_EXCLUDED(mu_);

  // Takes up to `n` (>= 0) whole tokens from `key`'s bucket; returns how many it took (all `n`
  // when limiting is off).
  int64_t TakeUpTo(const std::string& key, int64_t n) ABSL_LOCKS_EXCLUDED(mu_);

  bool enabled() const { return limit_.requests_per_second > 0; }

 private:
  struct Bucket {
    double tokens = 0;
    TimeMs updated_ms = 0;
  };
  // `key`'s bucket refilled to now; buckets full again (idle long enough to have refilled) are
  // dropped first once there are many, so keys that come and go (jobs) do not pile up.
  Bucket& RefilledLocked(const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static constexpr size_t kPruneAbove = 4096;
  const RateLimit limit_;
  const Clock& clock_;
  absl::Mutex mu_;
  std::map<std::string, Bucket> buckets_ ABSL_GUARDED_BY(mu_);
};

// Long-lived streams (`logs?follow=true`) each hold one of the server's threads until their job
// ends: at most `per_tenant` at once per tenant and `total` in all, so no tenant — and no set of
// tenants — can take every thread. The admin is not counted.
class StreamLimiter {
 public:
  StreamLimiter(int per_tenant, int total) : per_tenant_(per_tenant), total_(total) {}

  // Held while a stream is open; releases its place when destroyed.
  class Lease {
   public:
    Lease(StreamLimiter* limiter, std::string tenant)
        : limiter_(limiter), tenant_(std::move(tenant)) {}
    ~Lease() { limiter_->Release(tenant_); }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;

   private:
    StreamLimiter* limiter_;
    std::string tenant_;
  };

  // A lease for one more stream of `tenant`, or null when it or the server is at its limit.
  std::shared_ptr<Lease> Acquire(const std::string& tenant) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Release(const std::string& tenant) ABSL_LOCKS_EXCLUDED(mu_);

  const int per_tenant_;
  const int total_;
  absl::Mutex mu_;
  std::map<std::string, int> open_ ABSL_GUARDED_BY(mu_);
  int open_total_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace weft
