// Tenants' webhooks as the API manages them (control/webhooks.h): the receivers weftd may call,
// the per-tenant cap, even under concurrent registrations, and one tenant's webhooks out of
// another's reach.
#include "control/webhooks.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/sqlite_store.h"

namespace weft {
namespace {

using ::testing::HasSubstr;

class FixedClock : public Clock {
 public:
  TimeMs NowMs() const override { return 1000; }
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

}  // namespace
}  // namespace weft
