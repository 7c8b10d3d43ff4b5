// Bearer tokens through the token cache: a cached token answers without the store for its time
// to live, and a Clear() (what a revocation through the API does) takes effect at once, even
// against a lookup that read the store before it.
#include "api/auth.h"

#include <stdlib.h>

#include <filesystem>

#include "gtest/gtest.h"
#include "store/sqlite_store.h"

namespace weft::api {
namespace {

class ManualClock : public Clock {
 public:
  TimeMs NowMs() const override { return now_; }
  void Advance(TimeMs ms) { now_ += ms; }

 private:
  TimeMs now_ = 1'000'000;
};

class AuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/weft-auth-XXXXXX";
    dir_ = mkdtemp(tmpl);
    auto s = SqliteStore::Open(dir_ + "/weft.db");
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
    TenantRecord t;
    t.name = "acme";
    ASSERT_TRUE(store_->CreateTenant(t).ok());
    auto issued = IssueToken(*store_, "acme", clock_.NowMs());
    ASSERT_TRUE(issued.ok()) << issued.status();
    id_ = issued->first.id;
    header_ = "Bearer " + issued->second;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  ManualClock clock_;
  std::string dir_, id_, header_;
  std::unique_ptr<SqliteStore> store_;
};

TEST_F(AuthTest, WithoutACacheARevocationHoldsAtOnce) {
  auto c = Authenticate(*store_, header_);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->tenant, "acme");
  EXPECT_EQ(c->token_id, id_);
  ASSERT_TRUE(store_->RevokeToken("acme", id_, clock_.NowMs()).ok());
  EXPECT_TRUE(absl::IsUnauthenticated(Authenticate(*store_, header_).status()));
}

TEST_F(AuthTest, ACachedTokenServesForItsTimeToLiveAndClearEndsItAtOnce) {
  TokenCache cache(clock_, /*ttl_ms=*/1000);
  ASSERT_TRUE(Authenticate(*store_, header_, &cache).ok());
  // Revoked in the store by someone else (another process): the cache answers until the entry's
  // time to live is over, then the store's answer holds.
  ASSERT_TRUE(store_->RevokeToken("acme", id_, clock_.NowMs()).ok());
  clock_.Advance(999);
  auto stale = Authenticate(*store_, header_, &cache);
  ASSERT_TRUE(stale.ok()) << "within the time to live";
  EXPECT_EQ(stale->tenant, "acme");
  clock_.Advance(1);
  EXPECT_TRUE(absl::IsUnauthenticated(Authenticate(*store_, header_, &cache).status()));

  // A revocation through this weftd clears the cache: refused with no time to live left over.
  auto issued = IssueToken(*store_, "acme", clock_.NowMs());
  ASSERT_TRUE(issued.ok());
  const std::string header = "Bearer " + issued->second;
  ASSERT_TRUE(Authenticate(*store_, header, &cache).ok());
  ASSERT_TRUE(store_->RevokeToken("acme", issued->first.id, clock_.NowMs()).ok());
  cache.Clear();
  EXPECT_TRUE(absl::IsUnauthenticated(Authenticate(*store_, header, &cache).status()));
  // Refusals are never cached: an unknown token stays unknown, and nothing is kept for it.
  EXPECT_TRUE(absl::IsUnauthenticated(Authenticate(*store_, "Bearer nope", &cache).status()));
}

TEST_F(AuthTest, ALookupThatReadTheStoreBeforeAClearCachesNothing) {
  TokenCache cache(clock_, /*ttl_ms=*/1000);
  Caller caller;
  caller.tenant = "acme";
  const uint64_t before = cache.Generation();
  cache.Clear();  // a revocation lands between the lookup's store read and its Put
  cache.Put("digest", caller, before);
  EXPECT_FALSE(cache.Find("digest").has_value());
  cache.Put("digest", caller, cache.Generation());
  ASSERT_TRUE(cache.Find("digest").has_value());
  EXPECT_EQ(cache.Find("digest")->tenant, "acme");
}

TEST_F(AuthTest, TheCacheHoldsAtMostItsCapacity) {
  TokenCache cache(clock_, /*ttl_ms=*/1000, /*capacity=*/2);
  Caller caller;
  for (const char* d : {"a", "b", "c"}) cache.Put(d, caller, cache.Generation());
  int held = 0;
  for (const char* d : {"a", "b", "c"}) held += cache.Find(d).has_value() ? 1 : 0;
  EXPECT_LE(held, 2);
  EXPECT_TRUE(cache.Find("c").has_value()) << "the newest is kept";
}

}  // namespace
}  // namespace weft::api
