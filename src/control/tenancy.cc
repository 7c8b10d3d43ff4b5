#include "api/auth.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/files.h"
#include "common/ids.h"

namespace weft::api {

absl::StatusOr<Caller> Authenticate(Store& store, const std::string& authorization) {
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
  auto token = store.FindToken(Sha256Hex(std::string(v)));
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

absl::StatusOr<std::pair<TokenRecord, std::string>> IssueToken(Store& store,
                                                               const std::string& tenant,
                                                               TimeMs now) {
  std::string secret = NewSecretToken();
  TokenRecord rec;
  rec.id = NewTokenId();
  rec.tenant = tenant;
  rec.sha256 = Sha256Hex(secret);
  rec.created_ms = now;
  if (absl::Status s = store.CreateToken(rec); !s.ok()) return s;
  return std::make_pair(rec, secret);
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

absl::StatusOr<std::pair<TokenRecord, std::string>> RotateAdminToken(Store& store,
                                                                     const std::string& path,
                                                                     TimeMs now, Env& env) {
  auto issued = IssueToken(store, "", now);
  if (!issued.ok()) return issued.status();
  if (absl::Status s = WriteFileAtomic(env, path, issued->second + "\n", 0600); !s.ok()) return s;
  auto admin_tokens = store.ListTokens("");
  if (!admin_tokens.ok()) return admin_tokens.status();
  for (const TokenRecord& t : *admin_tokens) {
    if (t.id == issued->first.id || t.revoked_ms) continue;
    if (absl::Status s = store.RevokeToken("", t.id, now); !s.ok()) return s;
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

}  // namespace weft::api
