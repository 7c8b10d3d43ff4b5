// The PostgreSQL store: tenants and their bearer tokens (SHA-256 digests only), the files they
// upload (artifacts), the data sets the admin registers, and tenants' webhooks with the outbox
// of deliveries owed to them (the outbox is filled by AppendEventIn, in each transition's
// transaction).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "store/job_columns.h"
#include "store/pg_store.h"
#include "store/pg_store_run.h"

namespace weft {

namespace {

constexpr char kSelectTenants[] =
    "SELECT name, has_quota, quota_cpus, quota_memory_mb, quota_gpus, weight, created_ms, "
    "disk_quota_mb FROM tenants";
constexpr char kSelectTokens[] = "SELECT id, tenant, sha256, created_ms, revoked_ms FROM tokens";
constexpr char kSelectArtifacts[] =
    "SELECT tenant, name, sha256, bytes, created_ms FROM artifacts WHERE tenant=$1";
constexpr char kSelectDatasets[] = "SELECT name, path, format, tenants, created_ms FROM datasets";
constexpr char kSelectWebhooks[] =
    "SELECT w.id, w.tenant, w.url, w.events, w.secret, w.created_ms, w.last_status, "
    "w.last_attempt_ms, (SELECT COUNT(*) FROM webhook_deliveries d WHERE d.webhook_id = w.id "
    "AND d.state = 0) FROM webhooks w";

TenantRecord ReadTenant(const pqxx::row& row) {
  return {pg::Str(row[0]),  row[1].as<bool>(),   row[2].as<double>(),  row[3].as<int64_t>(),
          row[4].as<int>(), row[5].as<double>(), row[6].as<int64_t>(), pg::OptInt(row[7])};
}

TokenRecord ReadToken(const pqxx::row& row) {
  return {pg::Str(row[0]), pg::Str(row[1]), pg::Str(row[2]), row[3].as<int64_t>(),
          pg::OptInt(row[4])};
}

ArtifactRecord ReadArtifact(const pqxx::row& row) {
  return {pg::Str(row[0]), pg::Str(row[1]), pg::Str(row[2]), row[3].as<int64_t>(),
          row[4].as<int64_t>()};
}

constexpr char kSelectImages[] =
    "SELECT tenant, name, reference, digest, format, bytes, tenants, created_ms FROM images";

ImageRecord ReadImage(const pqxx::row& row) {
  ImageRecord i{pg::Str(row[0]),     pg::Str(row[1]),      pg::Str(row[2]), pg::Str(row[3]),
                pg::Str(row[4]),     row[5].as<int64_t>(), false,           {},
                row[7].as<int64_t>()};
  store_columns::ParseTenantsColumn(pg::Str(row[6]), &i);
  return i;
}

DatasetRecord ReadDataset(const pqxx::row& row) {
  DatasetRecord d{pg::Str(row[0]),     pg::Str(row[1]), pg::Str(row[2]), false, {},
                  row[4].as<int64_t>()};
  store_columns::ParseTenantsColumn(pg::Str(row[3]), &d);
  return d;
}

WebhookRecord ReadWebhook(const pqxx::row& row) {
  WebhookRecord w;
  w.id = pg::Str(row[0]);
  w.tenant = pg::Str(row[1]);
  w.url = pg::Str(row[2]);
  const std::string events = pg::Str(row[3]);
  if (!events.empty()) w.events = absl::StrSplit(events, ',');
  w.secret = pg::Str(row[4]);
  w.created_ms = row[5].as<int64_t>();
  w.last_status = pg::Str(row[6]);
  w.last_attempt_ms = pg::OptInt(row[7]);
  w.pending = row[8].as<int64_t>();
  return w;
}

WebhookDelivery ReadDelivery(const pqxx::row& row) {
  WebhookDelivery d;
  d.id = row[0].as<int64_t>();
  d.webhook_id = pg::Str(row[1]);
  d.url = pg::Str(row[2]);
  d.secret = pg::Str(row[3]);
  d.job = pg::Str(row[4]);
  d.tenant = pg::Str(row[5]);
  d.event = pg::Str(row[6]);
  if (!row[7].is_null()) d.from = pg::Str(row[7]);
  d.reason = pg::Str(row[8]);
  d.time_ms = row[9].as<int64_t>();
  d.attempts = row[10].as<int>();
  return d;
}

std::string NoTenant(const std::string& name) { return absl::StrCat("no tenant '", name, "'"); }
std::string NoArtifact(const std::string& name) { return absl::StrCat("no artifact '", name, "'"); }
std::string NoDataset(const std::string& name) { return absl::StrCat("no data set '", name, "'"); }
std::string NoImage(const std::string& name) { return absl::StrCat("no image '", name, "'"); }

absl::Status Renamed(absl::Status s, const std::string& already_exists) {
  if (absl::IsAlreadyExists(s)) return absl::AlreadyExistsError(already_exists);
  return s;
}

}  // namespace

absl::Status PgStore::CreateTenant(const TenantRecord& t) {
  return Renamed(Run("create tenant", Mode::kWrite,
                     [&](pg::Tx& tx) {
                       tx.Exec(
                           "INSERT INTO tenants (name, has_quota, quota_cpus, quota_memory_mb, "
                           "quota_gpus, weight, created_ms, disk_quota_mb) "
                           "VALUES ($1,$2,$3,$4,$5,$6,$7,$8)",
                           t.name, t.has_quota, t.quota_cpus, t.quota_memory_mb, t.quota_gpus,
                           t.weight, t.created_ms, t.disk_quota_mb);
                       return absl::OkStatus();
                     }),
                 absl::StrCat("tenant '", t.name, "' already exists"));
}

absl::StatusOr<TenantRecord> PgStore::GetTenant(const std::string& name) {
  return Run("get tenant", Mode::kRead, [&](pg::Tx& tx) {
    return tx.QueryOne<TenantRecord>(NoTenant(name), absl::StrCat(kSelectTenants, " WHERE name=$1"),
                                     ReadTenant, name);
  });
}

absl::StatusOr<std::vector<TenantRecord>> PgStore::ListTenants() {
  return Run(
      "list tenants", Mode::kRead, [&](pg::Tx& tx) -> absl::StatusOr<std::vector<TenantRecord>> {
        return tx.Query<TenantRecord>(absl::StrCat(kSelectTenants, " ORDER BY name"), ReadTenant);
      });
}

absl::Status PgStore::UpdateTenant(const TenantRecord& t) {
  return Run("update tenant", Mode::kWrite, [&](pg::Tx& tx) -> absl::Status {
    pqxx::result r = tx.Exec(
        "UPDATE tenants SET has_quota=$2, quota_cpus=$3, quota_memory_mb=$4, quota_gpus=$5, "
        "weight=$6, disk_quota_mb=$7 WHERE name=$1",
        t.name, t.has_quota, t.quota_cpus, t.quota_memory_mb, t.quota_gpus, t.weight,
        t.disk_quota_mb);
    if (r.affected_rows() == 0) return absl::NotFoundError(NoTenant(t.name));
    return absl::OkStatus();
  });
}

absl::Status PgStore::DeleteTenant(const std::string& name) {
  return Run("delete tenant", Mode::kWrite, [&](pg::Tx& tx) -> absl::Status {
    if (int64_t n = tx.Count("SELECT COUNT(*) FROM jobs WHERE tenant=$1", name); n > 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "tenant '", name, "' still owns ", n, n == 1 ? " job" : " jobs", "; delete them first"));
    }
    if (tx.Exec("DELETE FROM tenants WHERE name=$1", name).affected_rows() == 0) {
      return absl::NotFoundError(NoTenant(name));
    }
    tx.Exec("DELETE FROM tokens WHERE tenant=$1", name);
    tx.Exec("DELETE FROM artifacts WHERE tenant=$1", name);
    tx.Exec("DELETE FROM webhooks WHERE tenant=$1", name);
    ForgetTenantInDatasetsIn(tx, name);
    return absl::OkStatus();
  });
}

void PgStore::ForgetTenantInDatasetsIn(pg::Tx& tx, const std::string& tenant) {
  std::vector<DatasetRecord> all =
      tx.Query<DatasetRecord>(absl::StrCat(kSelectDatasets, " FOR UPDATE"), ReadDataset);
  for (DatasetRecord& d : all) {
    auto it = std::find(d.tenants.begin(), d.tenants.end(), tenant);
    if (it == d.tenants.end()) continue;
    d.tenants.erase(it);
    tx.Exec("UPDATE datasets SET tenants=$2 WHERE name=$1", d.name,
            store_columns::TenantsColumn(d));
  }
  // The tenant's own images go with it; the admin's it was granted no longer name it.
  tx.Exec("DELETE FROM images WHERE tenant=$1", tenant);
  std::vector<ImageRecord> images =
      tx.Query<ImageRecord>(absl::StrCat(kSelectImages, " WHERE tenant='' FOR UPDATE"), ReadImage);
  for (ImageRecord& i : images) {
    auto it = std::find(i.tenants.begin(), i.tenants.end(), tenant);
    if (it == i.tenants.end()) continue;
    i.tenants.erase(it);
    tx.Exec("UPDATE images SET tenants=$2 WHERE tenant='' AND name=$1", i.name,
            store_columns::TenantsColumn(i));
  }
}

absl::Status PgStore::CreateToken(const TokenRecord& t) {
  return Renamed(Run("create token", Mode::kWrite,
                     [&](pg::Tx& tx) {
                       tx.Exec(
                           "INSERT INTO tokens (id, tenant, sha256, created_ms, revoked_ms) "
                           "VALUES ($1,$2,$3,$4,$5)",
                           t.id, t.tenant, t.sha256, t.created_ms, t.revoked_ms);
                       return absl::OkStatus();
                     }),
                 "token id or digest already exists");
}

absl::StatusOr<TokenRecord> PgStore::FindToken(const std::string& sha256) {
  return Run("find token", Mode::kRead, [&](pg::Tx& tx) {
    return tx.QueryOne<TokenRecord>(
        "no such token", absl::StrCat(kSelectTokens, " WHERE sha256=$1"), ReadToken, sha256);
  });
}

absl::StatusOr<std::vector<TokenRecord>> PgStore::ListTokens(const std::string& tenant) {
  return Run("list tokens", Mode::kRead,
             [&](pg::Tx& tx) -> absl::StatusOr<std::vector<TokenRecord>> {
               return tx.Query<TokenRecord>(
                   absl::StrCat(kSelectTokens, " WHERE tenant=$1 ORDER BY created_ms, id"),
                   ReadToken, tenant);
             });
}

absl::Status PgStore::RevokeToken(const std::string& tenant, const std::string& id, TimeMs when) {
  return Run("revoke token", Mode::kWrite, [&](pg::Tx& tx) -> absl::Status {
    pqxx::result r =
        tx.Exec("UPDATE tokens SET revoked_ms=COALESCE(revoked_ms, $3) WHERE id=$1 AND tenant=$2",
                id, tenant, when);
    if (r.affected_rows() == 0) {
      return absl::NotFoundError(absl::StrCat("tenant '", tenant, "' has no token '", id, "'"));
    }
    return absl::OkStatus();
  });
}

absl::Status PgStore::PutArtifact(const ArtifactRecord& a) {
  return Run("put artifact", Mode::kWrite, [&](pg::Tx& tx) {
    tx.Exec(
        "INSERT INTO artifacts (tenant, name, sha256, bytes, created_ms) VALUES ($1,$2,$3,$4,$5) "
        "ON CONFLICT (tenant, name) DO UPDATE SET sha256=EXCLUDED.sha256, bytes=EXCLUDED.bytes, "
        "created_ms=EXCLUDED.created_ms",
        a.tenant, a.name, a.sha256, a.bytes, a.created_ms);
    return absl::OkStatus();
  });
}

absl::StatusOr<ArtifactRecord> PgStore::GetArtifact(const std::string& tenant,
                                                    const std::string& name) {
  return Run("get artifact", Mode::kRead, [&](pg::Tx& tx) {
    return tx.QueryOne<ArtifactRecord>(NoArtifact(name),
                                       absl::StrCat(kSelectArtifacts, " AND name=$2"), ReadArtifact,
                                       tenant, name);
  });
}

absl::StatusOr<std::vector<ArtifactRecord>> PgStore::ListArtifacts(const std::string& tenant) {
  return Run("list artifacts", Mode::kRead,
             [&](pg::Tx& tx) -> absl::StatusOr<std::vector<ArtifactRecord>> {
               return tx.Query<ArtifactRecord>(absl::StrCat(kSelectArtifacts, " ORDER BY name"),
                                               ReadArtifact, tenant);
             });
}

absl::StatusOr<int64_t> PgStore::DeleteArtifact(const std::string& tenant,
                                                const std::string& name) {
  return Run("delete artifact", Mode::kWrite, [&](pg::Tx& tx) -> absl::StatusOr<int64_t> {
    pqxx::result gone =
        tx.Exec("DELETE FROM artifacts WHERE tenant=$1 AND name=$2 RETURNING sha256", tenant, name);
    if (gone.empty()) return absl::NotFoundError(NoArtifact(name));
    return tx.Count("SELECT COUNT(*) FROM artifacts WHERE tenant=$1 AND sha256=$2", tenant,
                    pg::Str(gone[0][0]));
  });
}

absl::Status PgStore::PutImage(const ImageRecord& i) {
  return Run("put image", Mode::kWrite, [&](pg::Tx& tx) {
    tx.Exec(
        "INSERT INTO images (tenant, name, reference, digest, format, bytes, tenants, created_ms) "
        "VALUES ($1,$2,$3,$4,$5,$6,$7,$8) ON CONFLICT (tenant, name) DO UPDATE SET "
        "reference=EXCLUDED.reference, digest=EXCLUDED.digest, format=EXCLUDED.format, "
        "bytes=EXCLUDED.bytes, tenants=EXCLUDED.tenants, created_ms=EXCLUDED.created_ms",
        i.tenant, i.name, i.reference, i.digest, i.format, i.bytes, store_columns::TenantsColumn(i),
        i.created_ms);
    return absl::OkStatus();
  });
}

absl::StatusOr<ImageRecord> PgStore::GetImage(const std::string& owner, const std::string& name) {
  return Run("get image", Mode::kRead, [&](pg::Tx& tx) {
    return tx.QueryOne<ImageRecord>(NoImage(name),
                                    absl::StrCat(kSelectImages, " WHERE tenant=$1 AND name=$2"),
                                    ReadImage, owner, name);
  });
}

absl::StatusOr<std::vector<ImageRecord>> PgStore::ListImages() {
  return Run("list images", Mode::kRead,
             [&](pg::Tx& tx) -> absl::StatusOr<std::vector<ImageRecord>> {
               return tx.Query<ImageRecord>(absl::StrCat(kSelectImages, " ORDER BY tenant, name"),
                                            ReadImage);
             });
}

absl::Status PgStore::DeleteImage(const std::string& owner, const std::string& name) {
  return Run("delete image", Mode::kWrite, [&](pg::Tx& tx) -> absl::Status {
    if (tx.Exec("DELETE FROM images WHERE tenant=$1 AND name=$2", owner, name).affected_rows() ==
        0) {
      return absl::NotFoundError(NoImage(name));
    }
    return absl::OkStatus();
  });
}

absl::Status PgStore::PutDataset(const DatasetRecord& d) {
  return Run("put data set", Mode::kWrite, [&](pg::Tx& tx) {
    tx.Exec(
        "INSERT INTO datasets (name, path, format, tenants, created_ms) VALUES ($1,$2,$3,$4,$5) "
        "ON CONFLICT (name) DO UPDATE SET path=EXCLUDED.path, format=EXCLUDED.format, "
        "tenants=EXCLUDED.tenants, created_ms=EXCLUDED.created_ms",
        d.name, d.path, d.format, store_columns::TenantsColumn(d), d.created_ms);
    return absl::OkStatus();
  });
}

absl::StatusOr<DatasetRecord> PgStore::GetDataset(const std::string& name) {
  return Run("get data set", Mode::kRead, [&](pg::Tx& tx) {
    return tx.QueryOne<DatasetRecord>(
        NoDataset(name), absl::StrCat(kSelectDatasets, " WHERE name=$1"), ReadDataset, name);
  });
}

absl::StatusOr<std::vector<DatasetRecord>> PgStore::ListDatasets() {
  return Run("list data sets", Mode::kRead,
             [&](pg::Tx& tx) -> absl::StatusOr<std::vector<DatasetRecord>> {
               return tx.Query<DatasetRecord>(absl::StrCat(kSelectDatasets, " ORDER BY name"),
                                              ReadDataset);
             });
}

absl::Status PgStore::DeleteDataset(const std::string& name) {
  return Run("delete data set", Mode::kWrite, [&](pg::Tx& tx) -> absl::Status {
    if (tx.Exec("DELETE FROM datasets WHERE name=$1", name).affected_rows() == 0) {
      return absl::NotFoundError(NoDataset(name));
    }
    return absl::OkStatus();
  });
}

absl::Status PgStore::CreateWebhook(const WebhookRecord& w, int max_per_tenant) {
  return Renamed(
      Run("create webhook", Mode::kWrite,
          [&](pg::Tx& tx) {
            // One creation per tenant at a time, across weftd (two-key advisory locks
            // do not meet the one-key ones).
            tx.Exec("SELECT pg_advisory_xact_lock(1, hashtext($1))", w.tenant);
            const int64_t has = tx.Count("SELECT COUNT(*) FROM webhooks WHERE tenant=$1", w.tenant);
            if (has >= max_per_tenant) return store_columns::TooManyWebhooks(w.tenant, has);
            tx.Exec(
                "INSERT INTO webhooks (id, tenant, url, events, secret, created_ms) "
                "VALUES ($1,$2,$3,$4,$5,$6)",
                w.id, w.tenant, w.url, absl::StrJoin(w.events, ","), w.secret, w.created_ms);
            return absl::OkStatus();
          }),
      absl::StrCat("webhook ", w.id, " already exists"));
}

absl::StatusOr<std::vector<WebhookRecord>> PgStore::ListWebhooks(const std::string& tenant) {
  return Run("list webhooks", Mode::kRead,
             [&](pg::Tx& tx) -> absl::StatusOr<std::vector<WebhookRecord>> {
               return tx.Query<WebhookRecord>(
                   absl::StrCat(kSelectWebhooks, " WHERE w.tenant=$1 ORDER BY w.created_ms, w.id"),
                   ReadWebhook, tenant);
             });
}

absl::Status PgStore::DeleteWebhook(const std::string& tenant, const std::string& id) {
  return Run("delete webhook", Mode::kWrite, [&](pg::Tx& tx) -> absl::Status {
    // Its deliveries go with it (ON DELETE CASCADE).
    if (tx.Exec("DELETE FROM webhooks WHERE tenant=$1 AND id=$2", tenant, id).affected_rows() ==
        0) {
      return absl::NotFoundError(absl::StrCat("no webhook '", id, "'"));
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<WebhookDelivery>> PgStore::DueDeliveries(TimeMs now_ms, int limit) {
  return Run("due deliveries", Mode::kRead,
             [&](pg::Tx& tx) -> absl::StatusOr<std::vector<WebhookDelivery>> {
               return tx.Query<WebhookDelivery>(
                   "SELECT d.id, d.webhook_id, w.url, w.secret, d.job_id, d.tenant, d.event, "
                   "d.from_state, d.reason, d.time_ms, d.attempts FROM webhook_deliveries d "
                   "JOIN webhooks w ON w.id = d.webhook_id WHERE d.state = 0 AND "
                   "d.next_attempt_ms <= $1 ORDER BY d.id LIMIT $2",
                   ReadDelivery, now_ms, static_cast<int64_t>(limit));
             });
}

absl::Status PgStore::RecordDeliveryAttempt(int64_t id, TimeMs at_ms, const std::string& outcome,
                                            bool delivered, std::optional<TimeMs> retry_at_ms) {
  const int64_t state = delivered ? 1 : retry_at_ms ? 0 : 2;
  return Run("record delivery", Mode::kWrite, [&](pg::Tx& tx) -> absl::Status {
    pqxx::result r = tx.Exec(
        "UPDATE webhook_deliveries SET attempts = attempts + 1, state=$2, next_attempt_ms=$3 "
        "WHERE id=$1 RETURNING webhook_id",
        id, state, retry_at_ms.value_or(at_ms));
    if (r.empty()) return absl::OkStatus();  // its webhook was deleted meanwhile
    tx.Exec("UPDATE webhooks SET last_status=$2, last_attempt_ms=$3 WHERE id=$1", pg::Str(r[0][0]),
            outcome, at_ms);
    return absl::OkStatus();
  });
}

}  // namespace weft
