// Tenants and who is calling weftd: bearer tokens, stored only as SHA-256 digests. The admin
// token manages tenants and their tokens; a tenant token acts on that tenant's jobs only.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/env.h"
#include "store/store.h"

namespace weft {

struct Caller {
  bool admin = false;
  std::string tenant;  // empty for the admin
  std::string token_id;
};

// A token as issued: its record and the secret, which is shown once and never stored.
using IssuedToken = std::pair<TokenRecord, std::string>;

// The tenants and their tokens, as the API manages them (the admin's routes) and checks them (every
// request). Errors of the store come back as they are; the methods' own are named on each. Safe
// to call from any thread (the store serializes).
class Tenancy {
 public:
  // `store` and `clock` (which stamps tenants and tokens) are borrowed; `env` writes the admin
  // token file.
  Tenancy(Store& store, const Clock& clock, Env& env = Env::Default());

  // Resolves an `Authorization` header value ("Bearer <token>"). Unauthenticated when it is
  // missing, malformed, unknown or revoked (the message says which and what to do).
  absl::StatusOr<Caller> Authenticate(const std::string& authorization) const;

  // What removes weftd's files of a tenant (its artifacts, its jobs' kernel choices) once the
  // tenant is gone: OkStatus when none are left. Called by Delete, and by Create before a new
  // tenant takes a name, since a weftd that crashed in a Delete leaves them behind. Set once,
  // before the first request; without one a tenant has no files.
  using FileRemover = std::function<absl::Status(const std::string& tenant)>;
  void SetFileRemover(FileRemover remover) { remove_files_ = std::move(remover); }

  // Stores `tenant`, stamped now (its created_ms is set), once any files an earlier tenant of
  // the name left are removed. AlreadyExists for a name taken; the remover's error, with nothing
  // stored, when those files cannot be removed.
  absl::Status Create(TenantRecord* tenant) ABSL_LOCKS_EXCLUDED(names_mu_);
  // NotFound when there is no tenant `name`.
  absl::StatusOr<TenantRecord> Get(const std::string& name) const;
  absl::Status Update(const TenantRecord& tenant);
  // Removes the tenant from the store, then its files (a failure to remove them is logged: the
  // next Create of the name tries again). NotFound when there is no tenant `name`.
  absl::Status Delete(const std::string& name) ABSL_LOCKS_EXCLUDED(names_mu_);

  // `tenant`'s tokens (revoked ones too); NotFound when there is no such tenant.
  absl::StatusOr<std::vector<TokenRecord>> ListTokens(const std::string& tenant) const;
  // A new token for `tenant`; NotFound when there is no such tenant.
  absl::StatusOr<IssuedToken> IssueToken(const std::string& tenant);
  // NotFound when `tenant` has no token `id`.
  absl::Status RevokeToken(const std::string& tenant, const std::string& id);
  // Replaces the admin token: a new one is stored, then written to `path` (0600, durable), then
  // every other admin token is revoked. A crash part way leaves the old token valid (and perhaps
  // the new one as well); rotating again finishes the job.
  absl::StatusOr<IssuedToken> RotateAdminToken(const std::string& path);

 private:
  Store& store_;
  const Clock& clock_;
  Env& env_;
  FileRemover remove_files_;
  // One Create or Delete at a time, so that the files of a name are never removed while a tenant
  // that was just created under it has any.
  absl::Mutex names_mu_;
};

// On weftd's first start: creates the admin token, writes it to `<data_dir>/admin.token` (mode
// 0600, fsynced, before its digest is stored, so a crash cannot leave a stored token nobody has)
// and returns it to print once. nullopt when an admin token already exists.
absl::StatusOr<std::optional<std::string>> EnsureAdminToken(Store& store,
                                                            const std::string& data_dir, TimeMs now,
                                                            Env& env = Env::Default());

// Makes sure tenant `default` exists (no quota, weight 1): jobs stored before tenancy are its.
absl::Status EnsureDefaultTenant(Store& store, TimeMs now);

}  // namespace weft
