// The SQLite store: tenants (quota, weight) and bearer tokens (SHA-256 digests only).
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "store/sqlite_query.h"
#include "store/sqlite_store.h"

namespace weft {

namespace {

constexpr char kSelectTenants[] =
    "SELECT name, has_quota, quota_cpus, quota_memory_mb, quota_gpus, weight, created_ms, "
    "disk_quota_mb FROM tenants";
constexpr char kSelectTokens[] = "SELECT id, tenant, sha256, created_ms, revoked_ms FROM tokens";

TenantRecord ReadTenant(sqlite::Stmt& s) {
  return {s.Text(0), s.Int(1) != 0, s.Real(2),  s.Int(3), static_cast<int>(s.Int(4)),
          s.Real(5), s.Int(6),      s.OptInt(7)};
}

TokenRecord ReadToken(sqlite::Stmt& s) {
  return {s.Text(0), s.Text(1), s.Text(2), s.Int(3), s.OptInt(4)};
}

std::string NoTenant(const std::string& name) { return absl::StrCat("no tenant '", name, "'"); }

}  // namespace

absl::Status SqliteStore::CreateTenant(const TenantRecord& t) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<int> n = sqlite::Execute(
      *stmts_, "create tenant",
      "INSERT INTO tenants (name, has_quota, quota_cpus, quota_memory_mb, quota_gpus, "
      "weight, created_ms, disk_quota_mb) VALUES (?1,?2,?3,?4,?5,?6,?7,?8)",
      t.name, t.has_quota, t.quota_cpus, t.quota_memory_mb, t.quota_gpus, t.weight, t.created_ms,
      t.disk_quota_mb);
  if (absl::IsAlreadyExists(n.status())) {
    return absl::AlreadyExistsError(absl::StrCat("tenant '", t.name, "' already exists"));
  }
  return n.status();
}

absl::StatusOr<TenantRecord> SqliteStore::GetTenant(const std::string& name) {
  absl::MutexLock lock(&mu_);
  return sqlite::QueryOne<TenantRecord>(*stmts_, "get tenant", NoTenant(name),
                                        absl::StrCat(kSelectTenants, " WHERE name=?1"), ReadTenant,
                                        name);
}

absl::StatusOr<std::vector<TenantRecord>> SqliteStore::ListTenants() {
  absl::MutexLock lock(&mu_);
  return sqlite::Query<TenantRecord>(*stmts_, "list tenants",
                                     absl::StrCat(kSelectTenants, " ORDER BY name"), ReadTenant);
}

absl::Status SqliteStore::UpdateTenant(const TenantRecord& t) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(
      int n, sqlite::Execute(*stmts_, "update tenant",
                             "UPDATE tenants SET has_quota=?2, quota_cpus=?3, "
                             "quota_memory_mb=?4, quota_gpus=?5, weight=?6, disk_quota_mb=?7 "
                             "WHERE name=?1",
                             t.name, t.has_quota, t.quota_cpus, t.quota_memory_mb, t.quota_gpus,
                             t.weight, t.disk_quota_mb));
  if (n == 0) return absl::NotFoundError(NoTenant(t.name));
  return absl::OkStatus();
}

absl::Status SqliteStore::DeleteTenant(const std::string& name) {
  absl::MutexLock lock(&mu_);
  sqlite::Transaction tx(db_);
  RETURN_IF_ERROR(tx.Begun());
  ASSIGN_OR_RETURN(std::vector<int64_t> jobs,
                   sqlite::Query<int64_t>(
                       *stmts_, "count jobs", "SELECT COUNT(*) FROM jobs WHERE tenant=?1",
                       [](sqlite::Stmt& s) { return s.Int(0); }, name));
  if (int64_t n = jobs.empty() ? 0 : jobs[0]; n > 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "tenant '", name, "' still owns ", n, n == 1 ? " job" : " jobs", "; delete them first"));
  }
  ASSIGN_OR_RETURN(
      int n, sqlite::Execute(*stmts_, "delete tenant", "DELETE FROM tenants WHERE name=?1", name));
  if (n == 0) return absl::NotFoundError(NoTenant(name));
  RETURN_IF_ERROR(
      sqlite::Execute(*stmts_, "delete tokens", "DELETE FROM tokens WHERE tenant=?1", name)
          .status());
  RETURN_IF_ERROR(
      sqlite::Execute(*stmts_, "delete artifacts", "DELETE FROM artifacts WHERE tenant=?1", name)
          .status());
  RETURN_IF_ERROR(
      sqlite::Execute(*stmts_, "delete webhooks", "DELETE FROM webhooks WHERE tenant=?1", name)
          .status());
  RETURN_IF_ERROR(ForgetTenantInDatasetsLocked(name));
  ForgetTokensLocked();
  return tx.Commit();
}

absl::Status SqliteStore::CreateToken(const TokenRecord& t) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<int> n = sqlite::Execute(
      *stmts_, "create token",
      "INSERT INTO tokens (id, tenant, sha256, created_ms, revoked_ms) VALUES (?1,?2,?3,?4,?5)",
      t.id, t.tenant, t.sha256, t.created_ms, t.revoked_ms);
  if (absl::IsAlreadyExists(n.status())) {
    return absl::AlreadyExistsError("token id or digest already exists");
  }
  return n.status();
}

absl::StatusOr<TokenRecord> SqliteStore::FindToken(const std::string& sha256) {
  {
    absl::MutexLock cached(&tokens_mu_);
    if (auto it = tokens_.find(sha256); it != tokens_.end()) return it->second;
  }
  absl::MutexLock lock(&mu_);
  absl::StatusOr<TokenRecord> token = sqlite::QueryOne<TokenRecord>(
      *stmts_, "find token", "no such token", absl::StrCat(kSelectTokens, " WHERE sha256=?1"),
      ReadToken, sha256);
  if (token.ok()) {
    absl::MutexLock cached(&tokens_mu_);
    if (tokens_.size() >= kMaxCachedTokens) tokens_.clear();
    tokens_[sha256] = *token;
  }
  return token;
}

void SqliteStore::ForgetTokensLocked() {
  absl::MutexLock cached(&tokens_mu_);
  tokens_.clear();
}

absl::StatusOr<std::vector<TokenRecord>> SqliteStore::ListTokens(const std::string& tenant) {
  absl::MutexLock lock(&mu_);
  return sqlite::Query<TokenRecord>(
      *stmts_, "list tokens",
      absl::StrCat(kSelectTokens, " WHERE tenant=?1 ORDER BY created_ms, id"), ReadToken, tenant);
}

absl::Status SqliteStore::RevokeToken(const std::string& tenant, const std::string& id,
                                      TimeMs when) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(int n, sqlite::Execute(*stmts_, "revoke token",
                                          "UPDATE tokens SET revoked_ms=COALESCE(revoked_ms, ?3) "
                                          "WHERE id=?1 AND tenant=?2",
                                          id, tenant, when));
  ForgetTokensLocked();
  if (n == 0) {
    return absl::NotFoundError(absl::StrCat("tenant '", tenant, "' has no token '", id, "'"));
  }
  return absl::OkStatus();
}

}  // namespace weft
