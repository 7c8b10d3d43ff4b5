// weft webhook: a tenant's receivers of its jobs' states (POST /v1/webhooks; docs/operations.md).
#include <iostream>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/commands.h"

namespace weft::cli {
namespace {

struct Args {
  std::string url, events = "DELIVERED,COMPLETED,FAILED", id;
};

int Add(const Client& api, const Args& a) {
  std::vector<std::string> events = absl::StrSplit(a.events, ',', absl::SkipWhitespace());
  for (std::string& e : events) e = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(e));
  Reply r = api.Call("POST", "/v1/webhooks", json{{"url", a.url}, {"events", events}}.dump(),
                     "application/json");
  if (r.status != 201) return Fail(r);
  json j = r.Json();
  std::cout << "webhook " << j.value("id", "") << " added: " << j.value("url", "") << " hears of "
            << absl::StrJoin(j["events"].get<std::vector<std::string>>(), ", ") << "\n"
            << "secret (shown only now): " << j.value("secret", "") << "\n"
            << "each delivery carries X-Weft-Signature: sha256=<hex HMAC-SHA256 of the body "
               "under the secret> and X-Weft-Delivery (the same on every retry)\n";
  return 0;
}

int List(const Client& api) {
  Reply r = api.Call("GET", "/v1/webhooks");
  if (r.status != 200) return Fail(r);
  std::cout << absl::StrFormat("%-16s %-40s %-28s %7s  %s\n", "ID", "URL", "EVENTS", "PENDING",
                               "LAST STATUS");
  const json j = r.Json();
  for (const auto& w : j["webhooks"]) {
    std::cout << absl::StrFormat(
        "%-16s %-40s %-28s %7d  %s\n", w.value("id", ""), w.value("url", ""),
        absl::StrJoin(w["events"].get<std::vector<std::string>>(), ","),
        w.value("pending", int64_t{0}),
        w.value("last_status", "").empty() ? "-" : w.value("last_status", ""));
  }
  return 0;
}

}  // namespace

void AddWebhookCommands(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<Args>();
  auto run = [&ctx, a](CLI::App* cmd, auto fn) {
    cmd->callback([&ctx, a, fn] { ctx.exit_code = fn(ctx.client(), *a); });
  };
  auto* webhook = app.add_subcommand(
      "webhook", "receivers weftd POSTs your jobs' states to, signed (a tenant's token)");
  webhook->require_subcommand(1);
  auto* add = webhook->add_subcommand("add", "register a receiver; prints its secret once");
  add->add_option(
         "URL", a->url,
         "http(s)://host:port/path of a receiver weftd allows (weftd --webhook-allow HOST:PORT)")
      ->required();
  add->add_option("--events", a->events, "job states to hear of, comma-separated")
      ->capture_default_str();
  run(add, [](const Client& c, const Args& x) { return Add(c, x); });
  run(webhook->add_subcommand("list",
                              "your webhooks, with what they are owed and how the last "
                              "delivery went"),
      [](const Client& c, const Args&) { return List(c); });
  auto* remove = webhook->add_subcommand("delete", "remove a webhook and what it is owed");
  remove->add_option("ID", a->id, "webhook id (hook-…)")->required();
  run(remove, [](const Client& c, const Args& x) {
    return Act(c, "DELETE", "/v1/webhooks/" + x.id, "webhook " + x.id + " removed");
  });
}

}  // namespace weft::cli
