// Per-tenant request rate limits for the REST API: one token bucket per tenant (the classic
// token-bucket shaper, as in RFC 2697's committed rate and burst). A request takes one token;
// the bucket refills at `requests_per_second` up to `burst`. An empty bucket answers 429 with
// Retry-After, so one tenant's client retrying in a loop cannot starve the others or the control
// plane that shares weftd's threads.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "common/clock.h"

namespace weft::api {

struct RateLimit {
  double requests_per_second = 0;  // sustained rate per tenant; 0 turns limiting off
  double burst = 0;                // bucket size in requests; at least 1 when limiting
};

class RateLimiter {
 public:
  RateLimiter(RateLimit limit, const Clock& clock) : limit_(limit), clock_(clock) {}

  // Takes one request from `tenant`'s bucket. 0 when the request may go on; otherwise the
  // milliseconds until the bucket holds a whole token again (> 0), and nothing is taken.
  int64_t Acquire(const std::string& tenant) ABSL_LOCKS_EXCLUDED(mu_);

  bool enabled() const { return limit_.requests_per_second > 0; }

 private:
  struct Bucket {
    double tokens = 0;
    TimeMs updated_ms = 0;
  };
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

}  // namespace weft::api
