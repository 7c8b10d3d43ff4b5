// Who is calling weftd: bearer tokens, stored only as SHA-256 digests. The admin token manages
// tenants and their tokens; a tenant token acts on that tenant's jobs only.
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/env.h"
#include "store/store.h"

namespace weft::api {

struct Caller {
  bool admin = false;
  std::string tenant;  // empty for the admin
  std::string token_id;
};

// Resolves an `Authorization` header value ("Bearer <token>"). Unauthenticated when it is
// missing, malformed, unknown or revoked (the message says which and what to do).
absl::StatusOr<Caller> Authenticate(Store& store, const std::string& authorization);

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
