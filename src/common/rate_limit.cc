#include "common/rate_limit.h"

#include <algorithm>
#include <cmath>

namespace weft {

RateLimiter::Bucket& RateLimiter::RefilledLocked(const std::string& key) {
  const double burst = std::max(1.0, limit_.burst);
  const TimeMs now = clock_.NowMs();
  if (buckets_.size() > kPruneAbove) {
    const double refill_ms = burst * 1e3 / limit_.requests_per_second;
    for (auto it = buckets_.begin(); it != buckets_.end();) {
      it = now - it->second.updated_ms > refill_ms ? buckets_.erase(it) : std::next(it);
    }
  }
  auto [it, fresh] = buckets_.try_emplace(key, Bucket{burst, now});
  Bucket& b = it->second;
  if (!fresh && now > b.updated_ms) {
    b.tokens = std::min(burst, b.tokens + (now - b.updated_ms) * limit_.requests_per_second / 1e3);
    b.updated_ms = now;
  }
  return b;
}

int64_t RateLimiter::TakeUpTo(const std::string& key, int64_t n) {
  if (!enabled() || n <= 0) return std::max<int64_t>(n, 0);
  absl::MutexLock lock(&mu_);
  Bucket& b = RefilledLocked(key);
  const int64_t taken = std::min(n, static_cast<int64_t>(std::floor(b.tokens)));
  b.tokens -= static_cast<double>(taken);
  return taken;
}

int64_t RateLimiter::Acquire(const std::string& key) {
  if (!enabled()) return 0;
  absl::MutexLock lock(&mu_);
  Bucket& b = RefilledLocked(key);
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

}  // namespace weft
