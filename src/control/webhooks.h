// Webhooks: a tenant registers a URL and the job states it wants to hear of (Webhooks::Register,
// POST /v1/webhooks); every transition of its jobs into one of them is written to the store's
// outbox in the transition's own transaction (the outbox: store/store.h, "Webhooks"), and the
// WebhookDispatcher POSTs each delivery, signed, until the receiver answers 2xx — at least once,
// across weftd restarts.
//
// What a receiver gets: POST of a JSON body (DeliveryBody) with the headers
//   X-Weft-Signature: sha256=<hex HMAC-SHA256 of the body under the webhook's secret>
//   X-Weft-Delivery: <the delivery's id: the same on every retry; drop a duplicate by it>
//   X-Weft-Event: <the state entered, e.g. DELIVERED>
//   X-Weft-Webhook: <the webhook's id>
// Receivers may only be the hosts and ports the admin allowed (weftd --webhook-allow; none by
// default), so a tenant cannot make weftd probe the network: checked at registration and again
// before every attempt, with the address the host resolves to checked and pinned for the
// connection (control/webhook_receivers.h). What a tenant sees of an attempt is its receiver's
// HTTP status, or "not delivered"; why a connection failed is in weftd's log only.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "control/webhook_receivers.h"
#include "store/store.h"

namespace weft {

inline constexpr char kWebhookDeliveriesMetric[] = "weft_webhook_deliveries_total";

struct WebhookOptions {
  // The receivers weftd may call, by host and port (ParseWebhookAllow); none by default.
  // weftd --webhook-allow.
  std::vector<WebhookReceiver> allowed;
  int64_t poll_interval_ms = 500;  // how often the outbox is read
  int64_t timeout_ms = 5000;       // connecting, sending and awaiting the answer, each
  int max_attempts = 10;           // then the delivery is given up
  int64_t backoff_ms = 1000;       // the first retry's delay, doubled after every attempt
  int64_t backoff_max_ms = 300000;
  int max_per_tenant = 16;  // webhooks a tenant may have
};

// The JSON body of a delivery: {"delivery", "webhook", "event", "job", "tenant", "from",
// "state", "reason", "time"} (time RFC 3339 UTC; from null on submission). The same bytes on
// every attempt.
std::string DeliveryBody(const WebhookDelivery& delivery);

// "sha256=" + the hex HMAC-SHA256 of `body` under `secret`: the X-Weft-Signature header.
std::string DeliverySignature(const std::string& secret, const std::string& body);

// A tenant's webhooks as the API manages them. Thread-safe: the store counts and inserts a
// registration in one transaction, so concurrent ones — from any weftd — cannot pass the
// per-tenant cap together.
class Webhooks {
 public:
  Webhooks(Store& store, const Clock& clock, WebhookOptions options);

  const WebhookOptions& options() const { return options_; }

  // Registers `url` for `events` (job state names) of `tenant`'s jobs; returns the record with
  // its new id, its secret (shown to the tenant only now) and its creation time. InvalidArgument
  // when the URL is not one weftd may call (ParseWebhookUrl); FailedPrecondition when the tenant
  // already has max_per_tenant webhooks; the store's errors.
  absl::StatusOr<WebhookRecord> Register(const std::string& tenant, const std::string& url,
                                         const std::vector<std::string>& events);
  // The tenant's webhooks, oldest first, with their delivery state (last status, pending count):
  // what GET /v1/webhooks lists. The records hold the secrets; callers must not show them.
  // The store's errors.
  absl::StatusOr<std::vector<WebhookRecord>> List(const std::string& tenant);
  // Deletes the tenant's webhook `id` and its pending deliveries. NotFound when the tenant has
  // no such webhook (another tenant's included).
  absl::Status Delete(const std::string& tenant, const std::string& id);

 private:
  Store& store_;
  const Clock& clock_;
  const WebhookOptions options_;
};

class WebhookDispatcher {
 public:
  WebhookDispatcher(Store& store, const Clock& clock, WebhookOptions options);
  ~WebhookDispatcher();  // Stop()
  WebhookDispatcher(const WebhookDispatcher&) = delete;
  WebhookDispatcher& operator=(const WebhookDispatcher&) = delete;

  // A thread that calls DeliverDue every poll_interval_ms until Stop.
  void Start();
  void Stop();

  // Attempts every delivery due now once, one after another, and records each outcome: 2xx
  // delivered; anything else (another status, no connection, a timeout) retried after
  // backoff_ms × 2^(attempts − 1) (at most backoff_max_ms), or given up after max_attempts.
  void DeliverDue();

 private:
  // Sends one delivery; the outcome as the webhook shows its tenant ("200", "503", "not
  // delivered") and whether it was delivered. Why one was not reached goes to weftd's log.
  std::pair<std::string, bool> Send(const WebhookDelivery& d);

  Store& store_;
  const Clock& clock_;
  const WebhookOptions options_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace weft
