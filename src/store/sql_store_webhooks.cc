// The store: tenants' webhooks and the outbox of deliveries owed to them (the outbox is filled
// with each history entry, in its transition's transaction: sql_store_jobs.cc).
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "store/job_columns.h"
#include "store/sql_store.h"

namespace weft::sql_store {
namespace {

constexpr char kSelectWebhooks[] =
    "SELECT w.id, w.tenant, w.url, w.events, w.secret, w.created_ms, w.last_status, "
    "w.last_attempt_ms, (SELECT COUNT(*) FROM webhook_deliveries d WHERE d.webhook_id = w.id "
    "AND d.state = 0) FROM webhooks w";

WebhookRecord ReadWebhook(const sql::Row& row) {
  WebhookRecord w;
  w.id = row.Text(0);
  w.tenant = row.Text(1);
  w.url = row.Text(2);
  const std::string events = row.Text(3);
  if (!events.empty()) w.events = absl::StrSplit(events, ',');
  w.secret = row.Text(4);
  w.created_ms = row.Int(5);
  w.last_status = row.Text(6);
  w.last_attempt_ms = row.OptInt(7);
  w.pending = row.Int(8);
  return w;
}

WebhookDelivery ReadDelivery(const sql::Row& row) {
  WebhookDelivery d;
  d.id = row.Int(0);
  d.webhook_id = row.Text(1);
  d.url = row.Text(2);
  d.secret = row.Text(3);
  d.job = row.Text(4);
  d.tenant = row.Text(5);
  d.event = row.Text(6);
  if (!row.IsNull(7)) d.from = row.Text(7);
  d.reason = row.Text(8);
  d.time_ms = row.Int(9);
  d.attempts = static_cast<int>(row.Int(10));
  return d;
}

// Webhook creations of one tenant take turns (Tx::Lock's space).
constexpr int32_t kWebhookCreationLock = 1;

}  // namespace

absl::Status Webhooks::CreateWebhook(const WebhookRecord& w, int max_per_tenant) {
  absl::Status s = db_->Run("create webhook", sql::Mode::kWrite, [&](sql::Tx& tx) -> absl::Status {
    // Counted and inserted while no other creation for this tenant runs, in any weftd.
    RETURN_IF_ERROR(tx.Lock(kWebhookCreationLock, w.tenant));
    ASSIGN_OR_RETURN(
        int64_t has,
        tx.Count("count webhooks", "SELECT COUNT(*) FROM webhooks WHERE tenant=$1", w.tenant));
    if (has >= max_per_tenant) return store_columns::TooManyWebhooks(w.tenant, has);
    return tx
        .Execute("create webhook",
                 "INSERT INTO webhooks (id, tenant, url, events, secret, created_ms) VALUES "
                 "($1,$2,$3,$4,$5,$6)",
                 w.id, w.tenant, w.url, absl::StrJoin(w.events, ","), w.secret, w.created_ms)
        .status();
  });
  if (absl::IsAlreadyExists(s)) {
    return absl::AlreadyExistsError(absl::StrCat("webhook ", w.id, " already exists"));
  }
  return s;
}

absl::StatusOr<std::vector<WebhookRecord>> Webhooks::ListWebhooks(const std::string& tenant) {
  return db_->Run("list webhooks", sql::Mode::kRead, [&](sql::Tx& tx) {
    return tx.Query<WebhookRecord>(
        "list webhooks",
        absl::StrCat(kSelectWebhooks, " WHERE w.tenant=$1 ORDER BY w.created_ms, w.id"),
        ReadWebhook, tenant);
  });
}

absl::Status Webhooks::DeleteWebhook(const std::string& tenant, const std::string& id) {
  return db_->Run("delete webhook", sql::Mode::kWrite, [&](sql::Tx& tx) -> absl::Status {
    ASSIGN_OR_RETURN(
        int64_t n,
        tx.Execute("delete webhook", "DELETE FROM webhooks WHERE tenant=$1 AND id=$2", tenant, id));
    // What it is still owed goes with it (ON DELETE CASCADE).
    if (n == 0) return absl::NotFoundError(absl::StrCat("no webhook '", id, "'"));
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<WebhookDelivery>> Webhooks::DueDeliveries(TimeMs now_ms, int limit) {
  return db_->Run("due deliveries", sql::Mode::kRead, [&](sql::Tx& tx) {
    return tx.Query<WebhookDelivery>(
        "due deliveries",
        "SELECT d.id, d.webhook_id, w.url, w.secret, d.job_id, d.tenant, d.event, d.from_state, "
        "d.reason, d.time_ms, d.attempts FROM webhook_deliveries d JOIN webhooks w ON "
        "w.id = d.webhook_id WHERE d.state = 0 AND d.next_attempt_ms <= $1 ORDER BY d.id LIMIT $2",
        ReadDelivery, now_ms, static_cast<int64_t>(limit));
  });
}

absl::Status Webhooks::RecordDeliveryAttempt(int64_t id, TimeMs at_ms, const std::string& outcome,
                                             bool delivered, std::optional<TimeMs> retry_at_ms) {
  const int64_t state = delivered ? 1 : retry_at_ms ? 0 : 2;
  return db_->Run("record delivery", sql::Mode::kWrite, [&](sql::Tx& tx) -> absl::Status {
    ASSIGN_OR_RETURN(std::vector<std::string> webhook,
                     tx.Query<std::string>(
                         "record delivery",
                         "UPDATE webhook_deliveries SET attempts = attempts + 1, state=$2, "
                         "next_attempt_ms=$3 WHERE id=$1 RETURNING webhook_id",
                         [](const sql::Row& row) { return row.Text(0); }, id, state,
                         retry_at_ms.value_or(at_ms)));
    if (webhook.empty()) return absl::OkStatus();  // its webhook was deleted meanwhile
    return tx
        .Execute("record webhook status",
                 "UPDATE webhooks SET last_status=$2, last_attempt_ms=$3 WHERE id=$1", webhook[0],
                 outcome, at_ms)
        .status();
  });
}

}  // namespace weft::sql_store
