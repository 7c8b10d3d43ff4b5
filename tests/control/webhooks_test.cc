// Tenants' webhooks as the API manages them (control/webhooks.h): the receivers weftd may call,
// the per-tenant cap, even under concurrent registrations, and one tenant's webhooks out of
// another's reach.
#include "control/webhooks.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "store/sqlite_store.h"

namespace weft {
namespace {

using ::testing::HasSubstr;

class FixedClock : public Clock {
 public:
  TimeMs NowMs() const override { return 1000; }
};

class SteppingClock : public Clock {
 public:
  TimeMs NowMs() const override { return now_; }
  void Advance(TimeMs ms) { now_ += ms; }

 private:
  TimeMs now_ = 1000;
};

class WebhooksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/weft-webhooks-XXXXXX";
    dir_ = mkdtemp(tmpl);
    store_ = std::move(*SqliteStore::Open(dir_ + "/weft.db"));
    for (const char* name : {"a", "b"}) {
      TenantRecord t;
      t.name = name;
      ASSERT_TRUE(store_->CreateTenant(t).ok());
    }
    WebhookOptions options;
    options.max_per_tenant = 4;
    options.allowed = {{"127.0.0.1", 9}, {"localhost", 8080}};
    webhooks_ = std::make_unique<Webhooks>(*store_, clock_, options);
  }
  void TearDown() override {
    webhooks_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::string dir_;
  FixedClock clock_;
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<Webhooks> webhooks_;
};

TEST_F(WebhooksTest, ARegistrationGetsAnIdASecretAndItsTimeAndIsListedForItsTenantOnly) {
  absl::StatusOr<WebhookRecord> w =
      webhooks_->Register("a", "http://127.0.0.1:9/hook", {"DELIVERED", "COMPLETED"});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_FALSE(w->id.empty());
  EXPECT_GE(w->secret.size(), 32u);
  EXPECT_EQ(w->created_ms, 1000);
  EXPECT_EQ(w->tenant, "a");
  auto listed = webhooks_->List("a");
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].id, w->id);
  EXPECT_EQ((*listed)[0].url, "http://127.0.0.1:9/hook");
  EXPECT_TRUE(webhooks_->List("b")->empty());
  // Another tenant's webhook is as missing as one that never was.
  EXPECT_TRUE(absl::IsNotFound(webhooks_->Delete("b", w->id)));
  EXPECT_TRUE(webhooks_->Delete("a", w->id).ok());
  EXPECT_TRUE(webhooks_->List("a")->empty());
}

TEST_F(WebhooksTest, AHostTheAdminDidNotAllowIsRefusedAndNothingIsStored) {
  absl::StatusOr<WebhookRecord> w =
      webhooks_->Register("a", "http://169.254.169.254/latest", {"COMPLETED"});
  ASSERT_TRUE(absl::IsInvalidArgument(w.status())) << w.status();
  EXPECT_THAT(w.status().message(), HasSubstr("--webhook-allow"));
  EXPECT_TRUE(webhooks_->List("a")->empty());
}

TEST(WebhookReceiversTest, TheAdminAllowsReceiversByHostAndPort) {
  auto allowed = ParseWebhookAllow({"127.0.0.1:9000", "[::1]:9001", "Hooks.Example.com:443"});
  ASSERT_TRUE(allowed.ok()) << allowed.status();
  ASSERT_EQ(allowed->size(), 3u);
  EXPECT_EQ((*allowed)[1].host, "::1");
  EXPECT_EQ((*allowed)[1].port, 9001);
  for (const char* bad : {"127.0.0.1", "localhost:0", "host:65536", ":80", "[::1", "a b:80"}) {
    auto refused = ParseWebhookAllow({bad});
    EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << bad;
    EXPECT_THAT(refused.status().message(), HasSubstr(absl::StrCat("entry '", bad, "'")));
  }
  // A URL names a listed host and port, the scheme's default port included.
  EXPECT_TRUE(ParseWebhookUrl("http://127.0.0.1:9000/hook", *allowed).ok());
  EXPECT_TRUE(ParseWebhookUrl("http://[::1]:9001/", *allowed).ok());
  EXPECT_TRUE(ParseWebhookUrl("https://hooks.example.COM/x?y=1", *allowed).ok());
  for (const char* bad : {"http://127.0.0.1:22/", "http://127.0.0.1/", "http://hooks.example.com/",
                          "http://localhost:9000/", "http://[::1]:9000/"}) {
    auto refused = ParseWebhookUrl(bad, *allowed);
    EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << bad;
    EXPECT_THAT(refused.status().message(), HasSubstr("is not one weftd may call")) << bad;
  }
}

TEST(WebhookReceiversTest, InternalAddressesAreThoseOfPrivateLoopbackLinkLocalAndReservedRanges) {
  for (const char* ip :
       {"127.0.0.1", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1", "169.254.169.254",
        "100.64.0.1", "0.0.0.0", "224.0.0.1", "255.255.255.255", "::1", "::", "fe80::1", "fd00::1",
        "ff02::1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe"}) {
    EXPECT_TRUE(IsInternalAddress(ip)) << ip;
  }
  for (const char* ip : {"8.8.8.8", "172.32.0.1", "93.184.216.34", "2606:4700::1111",
                         "::ffff:8.8.8.8", "not-an-address"}) {
    EXPECT_FALSE(IsInternalAddress(ip)) << ip;
  }
}

// DNS rebinding and names for internal addresses: a listed name is called only at a public
// address, or at one the admin listed with the port; the address checked is the one connected to.
TEST(WebhookReceiversTest, ANameResolvingToAnInternalAddressIsRefusedUnlessThatAddressIsListed) {
  const WebhookUrl url{"http", "localhost", 8080, "/"};
  auto refused = ResolveReceiver(url, {{"localhost", 8080}});
  EXPECT_TRUE(absl::IsPermissionDenied(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("'localhost' resolves to "));
  EXPECT_THAT(refused.status().message(), HasSubstr("127.0.0.1"));
  auto listed = ResolveReceiver(url, {{"localhost", 8080}, {"127.0.0.1", 8080}});
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(*listed, "127.0.0.1");
  EXPECT_FALSE(ResolveReceiver(url, {{"localhost", 8080}, {"127.0.0.1", 8081}}).ok())
      << "listed with another port";
  auto public_address = ResolveReceiver({"https", "8.8.8.8", 443, "/"}, {{"8.8.8.8", 443}});
  ASSERT_TRUE(public_address.ok()) << public_address.status();
  EXPECT_EQ(*public_address, "8.8.8.8");
  EXPECT_TRUE(absl::IsNotFound(
      ResolveReceiver({"http", "no-such-host.invalid", 80, "/"}, {{"no-such-host.invalid", 80}})
          .status()));
}

TEST_F(WebhooksTest, ConcurrentRegistrationsNeverPassTheCap) {
  std::vector<std::thread> threads;
  std::atomic<int> refused{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 4; ++i) {
        auto w = webhooks_->Register("a", "http://localhost:8080/", {"FAILED"});
        if (absl::IsFailedPrecondition(w.status())) {
          EXPECT_THAT(w.status().message(), HasSubstr("has 4 webhooks"));
          ++refused;
        } else {
          EXPECT_TRUE(w.ok()) << w.status();
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(webhooks_->List("a")->size(), 4u);
  EXPECT_EQ(refused.load(), 12);
  // The cap is per tenant.
  EXPECT_TRUE(webhooks_->Register("b", "http://localhost:8080/", {"FAILED"}).ok());
}

// At delivery the receiver is checked again: one no longer listed with its port, or a listed
// name that resolves to a loopback address not listed itself, is never connected to, and its
// tenant is told no more than "not delivered"; once listed, the delivery is made.
TEST_F(WebhooksTest, ADeliveryIsMadeOnlyToAReceiverAllowedWhenItIsSent) {
  httplib::Server receiver;
  std::atomic<int> hits{0};
  receiver.Post("/hook", [&](const httplib::Request&, httplib::Response& res) {
    ++hits;
    res.status = 200;
  });
  const int port = receiver.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread serve([&] { receiver.listen_after_bind(); });
  const std::string by_address = absl::StrCat("http://127.0.0.1:", port, "/hook");
  const std::string by_name = absl::StrCat("http://localhost:", port, "/hook");
  for (const std::string& url : {by_address, by_name}) {
    WebhookRecord w{
        "hook-" + url.substr(7, 3), "a", url, {"QUEUED"}, "secret", 100, "", std::nullopt, 0};
    ASSERT_TRUE(store_->CreateWebhook(w, 16).ok());
  }
  JobRecord job;
  job.id = "job-1";
  job.tenant = "a";
  job.state = JobState::kQueued;
  ASSERT_TRUE(store_->CreateJob(job, "submitted").ok());  // a QUEUED delivery for each

  SteppingClock clock;
  WebhookOptions only_the_name;
  only_the_name.allowed = {{"localhost", port}};
  WebhookDispatcher(*store_, clock, only_the_name).DeliverDue();
  EXPECT_EQ(hits, 0) << "neither the unlisted address nor the name resolving to it";
  std::vector<WebhookRecord> hooks = *store_->ListWebhooks("a");
  ASSERT_EQ(hooks.size(), 2u);
  for (const WebhookRecord& w : hooks) {
    EXPECT_EQ(w.last_status, "not delivered") << w.url;
    EXPECT_EQ(w.pending, 1) << w.url;
  }

  clock.Advance(600'000);  // past the retry's backoff
  WebhookOptions the_address;
  the_address.allowed = {{"127.0.0.1", port}};
  WebhookDispatcher(*store_, clock, the_address).DeliverDue();
  EXPECT_EQ(hits, 1);
  hooks = *store_->ListWebhooks("a");
  for (const WebhookRecord& w : hooks) {
    EXPECT_EQ(w.last_status, w.url == by_address ? "200" : "not delivered") << w.url;
  }
  receiver.stop();
  serve.join();
}

}  // namespace
}  // namespace weft
