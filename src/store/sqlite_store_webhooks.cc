// The SQLite store: tenants' webhooks and the outbox of deliveries owed to them (the outbox is
// filled by AppendEventLocked, in each transition's transaction).
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "store/job_columns.h"
#include "store/sqlite_query.h"
#include "store/sqlite_store.h"

namespace weft {
namespace {

constexpr char kSelectWebhooks[] =
    "SELECT w.id, w.tenant, w.url, w.events, w.secret, w.created_ms, w.last_status, "
    "w.last_attempt_ms, (SELECT COUNT(*) FROM webhook_deliveries d WHERE d.webhook_id = w.id "
    "AND d.state = 0) FROM webhooks w";

WebhookRecord ReadWebhook(sqlite::Stmt& s) {
  WebhookRecord w;
  w.id = s.Text(0);
  w.tenant = s.Text(1);
  w.url = s.Text(2);
  const std::string events = s.Text(3);
  if (!events.empty()) w.events = absl::StrSplit(events, ',');
  w.secret = s.Text(4);
  w.created_ms = s.Int(5);
  w.last_status = s.Text(6);
  w.last_attempt_ms = s.OptInt(7);
  w.pending = s.Int(8);
  return w;
}

WebhookDelivery ReadDelivery(sqlite::Stmt& s) {
  WebhookDelivery d;
  d.id = s.Int(0);
  d.webhook_id = s.Text(1);
  d.url = s.Text(2);
  d.secret = s.Text(3);
  d.job = s.Text(4);
  d.tenant = s.Text(5);
  d.event = s.Text(6);
  if (!s.IsNull(7)) d.from = s.Text(7);
  d.reason = s.Text(8);
  d.time_ms = s.Int(9);
  d.attempts = static_cast<int>(s.Int(10));
  return d;
}

}  // namespace

absl::Status SqliteStore::CreateWebhook(const WebhookRecord& w, int max_per_tenant) {
  absl::MutexLock lock(&mu_);
  sqlite::Transaction tx(db_);
  RETURN_IF_ERROR(tx.Begun());
  ASSIGN_OR_RETURN(std::vector<int64_t> count,
                   sqlite::Query<int64_t>(
                       *stmts_, "count webhooks", "SELECT COUNT(*) FROM webhooks WHERE tenant=?1",
                       [](sqlite::Stmt& s) { return s.Int(0); }, w.tenant));
  if (const int64_t has = count.empty() ? 0 : count[0]; has >= max_per_tenant) {
    return store_columns::TooManyWebhooks(w.tenant, has);
  }
  absl::StatusOr<int> n =
      sqlite::Execute(*stmts_, "create webhook",
                      "INSERT INTO webhooks (id, tenant, url, events, secret, created_ms) VALUES "
                      "(?1,?2,?3,?4,?5,?6)",
                      w.id, w.tenant, w.url, absl::StrJoin(w.events, ","), w.secret, w.created_ms);
  if (absl::IsAlreadyExists(n.status())) {
    return absl::AlreadyExistsError(absl::StrCat("webhook ", w.id, " already exists"));
  }
  RETURN_IF_ERROR(n.status());
  return tx.Commit();
}

absl::StatusOr<std::vector<WebhookRecord>> SqliteStore::ListWebhooks(const std::string& tenant) {
  absl::MutexLock lock(&mu_);
  return sqlite::Query<WebhookRecord>(
      *stmts_, "list webhooks",
      absl::StrCat(kSelectWebhooks, " WHERE w.tenant=?1 ORDER BY w.created_ms, w.id"), ReadWebhook,
      tenant);
}

absl::Status SqliteStore::DeleteWebhook(const std::string& tenant, const std::string& id) {
  absl::MutexLock lock(&mu_);
  sqlite::Transaction tx(db_);
  RETURN_IF_ERROR(tx.Begun());
  ASSIGN_OR_RETURN(int n,
                   sqlite::Execute(*stmts_, "delete webhook",
                                   "DELETE FROM webhooks WHERE tenant=?1 AND id=?2", tenant, id));
  if (n == 0) return absl::NotFoundError(absl::StrCat("no webhook '", id, "'"));
  RETURN_IF_ERROR(sqlite::Execute(*stmts_, "delete deliveries",
                                  "DELETE FROM webhook_deliveries WHERE webhook_id=?1", id)
                      .status());
  return tx.Commit();
}

absl::StatusOr<std::vector<WebhookDelivery>> SqliteStore::DueDeliveries(TimeMs now_ms, int limit) {
  absl::MutexLock lock(&mu_);
  return sqlite::Query<WebhookDelivery>(
      *stmts_, "due deliveries",
      "SELECT d.id, d.webhook_id, w.url, w.secret, d.job_id, d.tenant, d.event, d.from_state, "
      "d.reason, d.time_ms, d.attempts FROM webhook_deliveries d JOIN webhooks w ON "
      "w.id = d.webhook_id WHERE d.state = 0 AND d.next_attempt_ms <= ?1 ORDER BY d.id LIMIT ?2",
      ReadDelivery, now_ms, static_cast<int64_t>(limit));
}

absl::Status SqliteStore::RecordDeliveryAttempt(int64_t id, TimeMs at_ms,
                                                const std::string& outcome, bool delivered,
                                                std::optional<TimeMs> retry_at_ms) {
  absl::MutexLock lock(&mu_);
  sqlite::Transaction tx(db_);
  RETURN_IF_ERROR(tx.Begun());
  const int64_t state = delivered ? 1 : retry_at_ms ? 0 : 2;
  ASSIGN_OR_RETURN(int n, sqlite::Execute(*stmts_, "record delivery",
                                          "UPDATE webhook_deliveries SET attempts = attempts + 1, "
                                          "state=?2, next_attempt_ms=?3 WHERE id=?1",
                                          id, state, retry_at_ms.value_or(at_ms)));
  if (n == 0) return absl::OkStatus();  // its webhook was deleted meanwhile
  RETURN_IF_ERROR(sqlite::Execute(*stmts_, "record webhook status",
                                  "UPDATE webhooks SET last_status=?2, last_attempt_ms=?3 WHERE "
                                  "id=(SELECT webhook_id FROM webhook_deliveries WHERE id=?1)",
                                  id, outcome, at_ms)
                      .status());
  return tx.Commit();
}

}  // namespace weft
