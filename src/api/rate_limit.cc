#include "api/rate_limit.h"

#include <algorithm>
#include <cmath>

namespace weft::api {

int64_t RateLimiter::Acquire(const std::string& tenant) {
  if (!enabled()) return 0;
  const double burst = std::max(1.0, limit_.burst);
  const TimeMs now = clock_.NowMs();
  absl::MutexLock lock(&mu_);
  auto [it, fresh] = buckets_.try_emplace(tenant, Bucket{burst, now});
  Bucket& b = it->second;
  if (!fresh && now > b.updated_ms) {
    b.tokens = std::min(burst, b.tokens + (now - b.updated_ms) * limit_.requests_per_second / 1e3);
    b.updated_ms = now;
  }
  if (b.tokens >= 1) {
    b.tokens -= 1;
    return 0;
  }
  return std::max<int64_t>(
      1, static_cast<int64_t>(std::ceil((1 - b.tokens) * 1e3 / limit_.requests_per_second)));
}

std::shared_ptr<StreamLimiter::Lease> StreamLimiter::Acquire(const std::string& tenant) {
  absl::MutexLock lock(&mu_);
  int& mine = open_[tenant];
  if (mine >= per_tenant_ || open_total_ >= total_) return nullptr;
  ++mine;
  ++open_total_;
  return std::make_shared<Lease>(this, tenant);
}

void StreamLimiter::Release(const std::string& tenant) {
  absl::MutexLock lock(&mu_);
  if (--open_[tenant] <= 0) open_.erase(tenant);
  --open_total_;
}

}  // namespace weft::api
