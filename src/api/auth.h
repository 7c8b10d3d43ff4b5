// Who is calling weftd: bearer tokens, stored only as SHA-256 digests. The admin token manages
// tenants and their tokens; a tenant token acts on that tenant's jobs only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/env.h"
#include "store/store.h"

namespace weft::api {

struct Caller {
  bool admin = false;
  std::string tenant;  // empty for the admin
  std::string token_id;
};

// Callers by token digest, so that most requests authenticate without a read of the store (the
// store serialises its readers, and a job's status read is the API's hottest call). An entry
// serves for `ttl_ms` milliseconds after the store accepted its token. A revocation or a tenant's
// deletion through this weftd calls Clear(), which takes effect at once, also against a lookup
// that read the store before it; one made by another process on the same store takes effect
// within `ttl_ms`. Holds at most `capacity` entries (past it, it starts again empty).
// Thread-safe.
class TokenCache {
 public:
  explicit TokenCache(const Clock& clock, int64_t ttl_ms = 1000, size_t capacity = 10000)
      : clock_(clock), ttl_ms_(ttl_ms), capacity_(capacity) {}

  // The caller of `digest`, if cached and fresh.
  std::optional<Caller> Find(const std::string& digest) const;
  // A value to pass to Put: read it before reading the store.
  uint64_t Generation() const;
  // Caches `caller` for `digest` unless Clear() was called since `generation` was read.
  void Put(const std::string& digest, const Caller& caller, uint64_t generation);
  // Forgets every entry (after a token is revoked or a tenant deleted).
  void Clear();

 private:
  struct Entry {
    Caller caller;
    TimeMs expires_ms = 0;
  };
  const Clock& clock_;
  const int64_t ttl_ms_;
  const size_t capacity_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
};

// Resolves an `Authorization` header value ("Bearer <token>"), through `cache` when given.
// Unauthenticated when it is missing, malformed, unknown or revoked (the message says which and
// what to do).
absl::StatusOr<Caller> Authenticate(Store& store, const std::string& authorization,
                                    TokenCache* cache = nullptr);

// On weftd's first start: creates the admin token, writes it to `<data_dir>/admin.token` (mode
// 0600, fsynced, before its digest is stored, so a crash cannot leave a stored token nobody has)
// and returns it to print once. nullopt when an admin token already exists.
absl::StatusOr<std::optional<std::string>> EnsureAdminToken(Store& store,
                                                            const std::string& data_dir, TimeMs now,
                                                            Env& env = Env::Default());

// Replaces the admin token: a new one is stored, then written to `path` (0600, durable), then
// every other admin token is revoked. Returns (record, token). A crash part way leaves the old
// token valid (and perhaps the new one as well); rotating again finishes the job.
absl::StatusOr<std::pair<TokenRecord, std::string>> RotateAdminToken(Store& store,
                                                                     const std::string& path,
                                                                     TimeMs now,
                                                                     Env& env = Env::Default());

// Makes sure tenant `default` exists (no quota, weight 1): jobs stored before tenancy are its.
absl::Status EnsureDefaultTenant(Store& store, TimeMs now);

// A new token for `tenant` (empty = admin): stores its digest and returns (record, token).
absl::StatusOr<std::pair<TokenRecord, std::string>> IssueToken(Store& store,
                                                               const std::string& tenant,
                                                               TimeMs now);

}  // namespace weft::api
