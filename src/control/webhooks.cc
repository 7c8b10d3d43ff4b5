#include "control/webhooks.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/ids.h"
#include "common/logging.h"
#include "common/metrics.h"
#include "common/status_macros.h"
#include "common/text.h"
#include "nlohmann/json.hpp"

namespace weft {
std::string DeliveryBody(const WebhookDelivery& d) {
  nlohmann::json j = {{"delivery", d.id},
                      {"webhook", d.webhook_id},
                      {"event", d.event},
                      {"job", d.job},
                      {"tenant", d.tenant},
                      {"from", d.from ? nlohmann::json(*d.from) : nlohmann::json(nullptr)},
                      {"state", d.event},
                      {"reason", d.reason},
                      {"time", FormatTimeMs(d.time_ms)}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string DeliverySignature(const std::string& secret, const std::string& body) {
  return "sha256=" + HmacSha256Hex(secret, body);
}

Webhooks::Webhooks(Store& store, const Clock& clock, WebhookOptions options)
    : store_(store), clock_(clock), options_(std::move(options)) {}

absl::StatusOr<WebhookRecord> Webhooks::Register(const std::string& tenant, const std::string& url,
                                                 const std::vector<std::string>& events) {
  if (absl::StatusOr<WebhookUrl> u = ParseWebhookUrl(url, options_.allowed); !u.ok()) {
    return u.status();
  }
  WebhookRecord w;
  w.id = NewWebhookId();
  w.tenant = tenant;
  w.url = url;
  w.events = events;
  w.secret = NewWebhookSecret();
  w.created_ms = clock_.NowMs();
  RETURN_IF_ERROR(store_.CreateWebhook(w, options_.max_per_tenant));
  return w;
}

absl::StatusOr<std::vector<WebhookRecord>> Webhooks::List(const std::string& tenant) {
  return store_.ListWebhooks(tenant);
}

absl::Status Webhooks::Delete(const std::string& tenant, const std::string& id) {
  return store_.DeleteWebhook(tenant, id);
}

WebhookDispatcher::WebhookDispatcher(Store& store, const Clock& clock, WebhookOptions options)
    : store_(store), clock_(clock), options_(std::move(options)) {
  MetricsRegistry::Global().DeclareCounter(
      kWebhookDeliveriesMetric, "webhook delivery attempts by outcome (delivered, retry, gave_up)");
}

WebhookDispatcher::~WebhookDispatcher() { Stop(); }

void WebhookDispatcher::Start() {
  thread_ = std::thread([this] {
    absl::MutexLock lock(&mu_);
    while (!stop_) {
      mu_.Unlock();
      DeliverDue();
      mu_.Lock();
      mu_.AwaitWithTimeout(absl::Condition(&stop_), absl::Milliseconds(options_.poll_interval_ms));
    }
  });
}

void WebhookDispatcher::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

std::pair<std::string, bool> WebhookDispatcher::Send(const WebhookDelivery& d) {
  constexpr char kNotDelivered[] = "not delivered";
  absl::StatusOr<WebhookUrl> url = ParseWebhookUrl(d.url, options_.allowed);
  absl::StatusOr<std::string> address = url.ok() ? ResolveReceiver(*url, options_.allowed)
                                                 : absl::StatusOr<std::string>(url.status());
  if (!address.ok()) {
    spdlog::warn("webhook {}: {} not called: {}", d.webhook_id, Printable(d.url),
                 address.status().message());
    return {kNotDelivered, false};
  }
  const std::string host =
      url->host.find(':') != std::string::npos ? absl::StrCat("[", url->host, "]") : url->host;
  httplib::Client client(absl::StrCat(url->scheme, "://", host, ":", url->port));
  // Connect to the address checked above, not to whatever the name resolves to next.
  client.set_hostname_addr_map({{url->host, *address}});
  const time_t seconds = static_cast<time_t>(options_.timeout_ms / 1000);
  const time_t micros = static_cast<time_t>((options_.timeout_ms % 1000) * 1000);
  client.set_connection_timeout(seconds, micros);
  client.set_read_timeout(seconds, micros);
  client.set_write_timeout(seconds, micros);
  const std::string body = DeliveryBody(d);
  httplib::Headers headers = {{"X-Weft-Signature", DeliverySignature(d.secret, body)},
                              {"X-Weft-Delivery", absl::StrCat(d.id)},
                              {"X-Weft-Event", d.event},
                              {"X-Weft-Webhook", d.webhook_id},
                              {"User-Agent", "weftd-webhooks"}};
  httplib::Result r = client.Post(url->path, headers, body, "application/json");
  if (!r) {
    spdlog::warn("webhook {}: {} ({}) not reached: {}", d.webhook_id, Printable(d.url), *address,
                 httplib::to_string(r.error()));
    return {kNotDelivered, false};
  }
  return {absl::StrCat(r->status), r->status >= 200 && r->status < 300};
}

void WebhookDispatcher::DeliverDue() {
  absl::StatusOr<std::vector<WebhookDelivery>> due = store_.DueDeliveries(clock_.NowMs(), 32);
  if (!due.ok()) {
    spdlog::error("webhooks: cannot read the outbox: {}", due.status().message());
    return;
  }
  MetricsRegistry& m = MetricsRegistry::Global();
  for (const WebhookDelivery& d : *due) {
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
    }
    auto [outcome, delivered] = Send(d);
    const TimeMs now = clock_.NowMs();
    const int attempts = d.attempts + 1;
    std::optional<TimeMs> retry_at;
    if (!delivered && attempts < options_.max_attempts) {
      const int64_t delay =
          std::min(options_.backoff_ms << std::min(attempts - 1, 20), options_.backoff_max_ms);
      retry_at = now + delay;
    } else if (!delivered) {
      outcome = absl::StrCat(outcome, "; gave up after ", attempts, " attempts");
    }
    const char* what = delivered ? "delivered" : retry_at ? "retry" : "gave_up";
    m.Add(kWebhookDeliveriesMetric, {{"outcome", what}});
    if (!delivered) {
      spdlog::warn("webhook {}: delivery {} ({} of job {}) attempt {}: {}", d.webhook_id, d.id,
                   d.event, d.job, attempts, outcome);
    }
    absl::Status s = store_.RecordDeliveryAttempt(d.id, now, outcome, delivered, retry_at);
    if (!s.ok()) spdlog::error("webhooks: cannot record delivery {}: {}", d.id, s.message());
  }
}

}  // namespace weft
