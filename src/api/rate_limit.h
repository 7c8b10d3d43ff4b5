// Per-tenant request rate limits for the REST API: one token bucket per tenant (the classic
// token-bucket shaper, as in RFC 2697's committed rate and burst). A request takes one token;
// the bucket refills at `requests_per_second` up to `burst`. An empty bucket answers 429 with
// Retry-After, so one tenant's client retrying in a loop cannot starve the others or the control
// plane that shares weftd's threads.
#pragma once

#include <map>
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

}  // namespace weft::api
