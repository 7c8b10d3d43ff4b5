#include "control/tenancy.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/files.h"
#include "common/ids.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace weft {

namespace {

// Stores a new token of `tenant` (empty: the admin) and returns it.
absl::StatusOr<IssuedToken> StoreNewToken(Store& store, const std::string& tenant, TimeMs now) {
  std::string secret = NewSecretToken();
  TokenRecord rec;
  rec.id = NewTokenId();
  rec.tenant = tenant;
  rec.sha256 = Sha256Hex(secret);
  rec.created_ms = now;
  if (absl::Status s = store.CreateToken(rec); !s.ok()) return s;
  return std::make_pair(rec, secret);
}

}  // namespace

Tenancy::Tenancy(Store& store, const Clock& clock, Env& env)
    : store_(store), clock_(clock), env_(env) {}

absl::StatusOr<Caller> Tenancy::Authenticate(const std::string& authorization) const {
  absl::string_view v = absl::StripAsciiWhitespace(authorization);
  if (v.empty()) {
    return absl::UnauthenticatedError(
        "missing bearer token: send 'Authorization: Bearer <token>' (the CLI reads WEFT_TOKEN or "
        "--token; tenant tokens come from `weft token create TENANT`, the admin token is in "
        "<data-dir>/admin.token)");
  }
  if (!absl::ConsumePrefix(&v, "Bearer ") && !absl::ConsumePrefix(&v, "bearer ")) {
    return absl::UnauthenticatedError("the Authorization header must be 'Bearer <token>'");
  }
  v = absl::StripAsciiWhitespace(v);
  auto token = store_.FindToken(Sha256Hex(std::string(v)));
  if (!token.ok()) {
    if (absl::IsNotFound(token.status())) return absl::UnauthenticatedError("invalid token");
    return token.status();
  }
  if (token->revoked_ms) return absl::UnauthenticatedError("this token was revoked");
  Caller c;
  c.admin = token->tenant.empty();
  c.tenant = token->tenant;
  c.token_id = token->id;
  return c;
}

absl::Status Tenancy::Create(TenantRecord* tenant) {
  absl::MutexLock lock(&names_mu_);
  // A tenant of the name has no token, so nothing of it can be uploaded or run meanwhile.
  if (remove_files_ && absl::IsNotFound(store_.GetTenant(tenant->name).status())) {
    if (absl::Status s = remove_files_(tenant->name); !s.ok()) {
      return absl::Status(
          s.code(),
          absl::StrCat("tenant '", tenant->name, "' is not created: the files an ",
                       "earlier tenant of that name left cannot be removed: ", s.message()));
    }
  }
  tenant->created_ms = clock_.NowMs();
  return store_.CreateTenant(*tenant);
}

absl::StatusOr<TenantRecord> Tenancy::Get(const std::string& name) const {
  return store_.GetTenant(name);
}

absl::Status Tenancy::Update(const TenantRecord& tenant) { return store_.UpdateTenant(tenant); }

absl::Status Tenancy::Delete(const std::string& name) {
  absl::MutexLock lock(&names_mu_);
  RETURN_IF_ERROR(store_.DeleteTenant(name));
  if (!remove_files_) return absl::OkStatus();
  if (absl::Status s = remove_files_(name); !s.ok()) {
    spdlog::warn("tenant {} deleted; its files stay until a tenant of its name is created: {}",
                 name, s.message());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TokenRecord>> Tenancy::ListTokens(const std::string& tenant) const {
  if (auto t = store_.GetTenant(tenant); !t.ok()) return t.status();
  return store_.ListTokens(tenant);
}

absl::StatusOr<IssuedToken> Tenancy::IssueToken(const std::string& tenant) {
  if (auto t = store_.GetTenant(tenant); !t.ok()) return t.status();
  return StoreNewToken(store_, tenant, clock_.NowMs());
}

absl::Status Tenancy::RevokeToken(const std::string& tenant, const std::string& id) {
  return store_.RevokeToken(tenant, id, clock_.NowMs());
}

absl::StatusOr<std::optional<std::string>> EnsureAdminToken(Store& store,
                                                            const std::string& data_dir, TimeMs now,
                                                            Env& env) {
  auto existing = store.ListTokens("");
  if (!existing.ok()) return existing.status();
  for (const auto& t : *existing) {
    if (!t.revoked_ms) return std::optional<std::string>();
  }
  std::string secret = NewSecretToken();
  // Durable (fsync of file and directory) before the digest is stored.
  if (absl::Status s = WriteFileAtomic(env, data_dir + "/admin.token", secret + "\n", 0600);
      !s.ok())
    return s;
  TokenRecord rec;
  rec.id = NewTokenId();
  rec.sha256 = Sha256Hex(secret);
  rec.created_ms = now;
  if (absl::Status s = store.CreateToken(rec); !s.ok()) return s;
  return std::optional<std::string>(secret);
}

absl::StatusOr<IssuedToken> Tenancy::RotateAdminToken(const std::string& path) {
  const TimeMs now = clock_.NowMs();
  auto issued = StoreNewToken(store_, "", now);
  if (!issued.ok()) return issued.status();
  if (absl::Status s = WriteFileAtomic(env_, path, issued->second + "\n", 0600); !s.ok()) return s;
  auto admin_tokens = store_.ListTokens("");
  if (!admin_tokens.ok()) return admin_tokens.status();
  for (const TokenRecord& t : *admin_tokens) {
    if (t.id == issued->first.id || t.revoked_ms) continue;
    if (absl::Status s = store_.RevokeToken("", t.id, now); !s.ok()) return s;
  }
  return issued;
}

absl::Status EnsureDefaultTenant(Store& store, TimeMs now) {
  auto t = store.GetTenant("default");
  if (t.ok()) return absl::OkStatus();
  if (!absl::IsNotFound(t.status())) return t.status();
  TenantRecord rec;
  rec.name = "default";
  rec.created_ms = now;
  absl::Status s = store.CreateTenant(rec);
  return absl::IsAlreadyExists(s) ? absl::OkStatus() : s;
}

}  // namespace weft
