// The store: tenants (quota, weight) and their bearer tokens (SHA-256 digests only).
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "store/sql_store.h"

namespace weft::sql_store {
namespace {

constexpr char kSelectTenants[] =
    "SELECT name, has_quota, quota_cpus, quota_memory_mb, quota_gpus, weight, created_ms, "
    "disk_quota_mb, deleted_jobs_gpu_ms FROM tenants";
constexpr char kSelectTokens[] = "SELECT id, tenant, sha256, created_ms, revoked_ms FROM tokens";

TenantRecord ReadTenant(const sql::Row& row) {
  return {row.Text(0), row.Bool(1), row.Real(2),   row.Int(3), static_cast<int>(row.Int(4)),
          row.Real(5), row.Int(6),  row.OptInt(7), row.Int(8)};
}

TokenRecord ReadToken(const sql::Row& row) {
  return {row.Text(0), row.Text(1), row.Text(2), row.Int(3), row.OptInt(4)};
}

std::string NoTenant(const std::string& name) { return absl::StrCat("no tenant '", name, "'"); }

// `s`, with an AlreadyExists saying `already_exists`.
absl::Status Renamed(absl::Status s, const std::string& already_exists) {
  if (absl::IsAlreadyExists(s)) return absl::AlreadyExistsError(already_exists);
  return s;
}

}  // namespace

absl::Status Tenants::CreateTenant(const TenantRecord& t) {
  return Renamed(db_->Run("create tenant", sql::Mode::kWrite,
                          [&](sql::Tx& tx) {
                            return tx
                                .Execute("create tenant",
                                         "INSERT INTO tenants (name, has_quota, quota_cpus, "
                                         "quota_memory_mb, quota_gpus, weight, created_ms, "
                                         "disk_quota_mb) VALUES ($1,$2,$3,$4,$5,$6,$7,$8)",
                                         t.name, t.has_quota, t.quota_cpus, t.quota_memory_mb,
                                         t.quota_gpus, t.weight, t.created_ms, t.disk_quota_mb)
                                .status();
                          }),
                 absl::StrCat("tenant '", t.name, "' already exists"));
}

absl::StatusOr<TenantRecord> Tenants::GetTenant(const std::string& name) {
  return db_->Run("get tenant", sql::Mode::kRead, [&](sql::Tx& tx) {
    return tx.QueryOne<TenantRecord>("get tenant", NoTenant(name),
                                     absl::StrCat(kSelectTenants, " WHERE name=$1"), ReadTenant,
                                     name);
  });
}

absl::StatusOr<std::vector<TenantRecord>> Tenants::ListTenants() {
  return db_->Run("list tenants", sql::Mode::kRead, [&](sql::Tx& tx) {
    return tx.Query<TenantRecord>("list tenants", absl::StrCat(kSelectTenants, " ORDER BY name"),
                                  ReadTenant);
  });
}

absl::Status Tenants::UpdateTenant(const TenantRecord& t) {
  return db_->Run("update tenant", sql::Mode::kWrite, [&](sql::Tx& tx) -> absl::Status {
    ASSIGN_OR_RETURN(int64_t n, tx.Execute("update tenant",
                                           "UPDATE tenants SET has_quota=$2, quota_cpus=$3, "
                                           "quota_memory_mb=$4, quota_gpus=$5, weight=$6, "
                                           "disk_quota_mb=$7 WHERE name=$1",
                                           t.name, t.has_quota, t.quota_cpus, t.quota_memory_mb,
                                           t.quota_gpus, t.weight, t.disk_quota_mb));
    if (n == 0) return absl::NotFoundError(NoTenant(t.name));
    return absl::OkStatus();
  });
}

absl::Status Tenants::DeleteTenant(const std::string& name) {
  absl::Status s = db_->Run("delete tenant", sql::Mode::kWrite, [&](sql::Tx& tx) -> absl::Status {
    ASSIGN_OR_RETURN(int64_t jobs,
                     tx.Count("count jobs", "SELECT COUNT(*) FROM jobs WHERE tenant=$1", name));
    if (jobs > 0) {
      return absl::FailedPreconditionError(absl::StrCat("tenant '", name, "' still owns ", jobs,
                                                        jobs == 1 ? " job" : " jobs",
                                                        "; delete them first"));
    }
    ASSIGN_OR_RETURN(
        int64_t experiments,
        tx.Count("count experiments", "SELECT COUNT(*) FROM experiments WHERE tenant=$1", name));
    if (experiments > 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("tenant '", name, "' still owns ", experiments,
                       experiments == 1 ? " experiment" : " experiments", "; delete them first"));
    }
    ASSIGN_OR_RETURN(int64_t n,
                     tx.Execute("delete tenant", "DELETE FROM tenants WHERE name=$1", name));
    if (n == 0) return absl::NotFoundError(NoTenant(name));
    for (const char* table : {"tokens", "artifacts", "webhooks"}) {
      RETURN_IF_ERROR(tx.Execute(absl::StrCat("delete ", table),
                                 absl::StrCat("DELETE FROM ", table, " WHERE tenant=$1"), name)
                          .status());
    }
    return ForgetTenantInGrantsIn(tx, name);
  });
  ForgetTokens();
  return s;
}

absl::Status Tenants::CreateToken(const TokenRecord& t) {
  return Renamed(db_->Run("create token", sql::Mode::kWrite,
                          [&](sql::Tx& tx) {
                            return tx
                                .Execute("create token",
                                         "INSERT INTO tokens (id, tenant, sha256, created_ms, "
                                         "revoked_ms) VALUES ($1,$2,$3,$4,$5)",
                                         t.id, t.tenant, t.sha256, t.created_ms, t.revoked_ms)
                                .status();
                          }),
                 "token id or digest already exists");
}

absl::StatusOr<TokenRecord> Tenants::FindToken(const std::string& sha256) {
  if (cache_tokens_) {
    absl::MutexLock cached(&tokens_mu_);
    if (auto it = tokens_.find(sha256); it != tokens_.end()) return it->second;
  }
  // Filled inside the read's transaction, so no write to the tokens table (which empties the
  // cache after it commits) can come between the read and the fill.
  return db_->Run("find token", sql::Mode::kRead, [&](sql::Tx& tx) -> absl::StatusOr<TokenRecord> {
    ASSIGN_OR_RETURN(TokenRecord token,
                     tx.QueryOne<TokenRecord>("find token", "no such token",
                                              absl::StrCat(kSelectTokens, " WHERE sha256=$1"),
                                              ReadToken, sha256));
    if (cache_tokens_) {
      absl::MutexLock cached(&tokens_mu_);
      if (tokens_.size() >= kMaxCachedTokens) tokens_.clear();
      tokens_[sha256] = token;
    }
    return token;
  });
}

void Tenants::ForgetTokens() {
  absl::MutexLock cached(&tokens_mu_);
  tokens_.clear();
}

absl::StatusOr<std::vector<TokenRecord>> Tenants::ListTokens(const std::string& tenant) {
  return db_->Run("list tokens", sql::Mode::kRead, [&](sql::Tx& tx) {
    return tx.Query<TokenRecord>(
        "list tokens", absl::StrCat(kSelectTokens, " WHERE tenant=$1 ORDER BY created_ms, id"),
        ReadToken, tenant);
  });
}

absl::Status Tenants::RevokeToken(const std::string& tenant, const std::string& id, TimeMs when) {
  absl::Status s = db_->Run("revoke token", sql::Mode::kWrite, [&](sql::Tx& tx) -> absl::Status {
    ASSIGN_OR_RETURN(int64_t n, tx.Execute("revoke token",
                                           "UPDATE tokens SET revoked_ms=COALESCE(revoked_ms, $3) "
                                           "WHERE id=$1 AND tenant=$2",
                                           id, tenant, when));
    if (n == 0) {
      return absl::NotFoundError(absl::StrCat("tenant '", tenant, "' has no token '", id, "'"));
    }
    return absl::OkStatus();
  });
  ForgetTokens();
  return s;
}

}  // namespace weft::sql_store
