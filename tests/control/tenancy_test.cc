// Who may see and do what, as control/ answers the API: tenants and tokens (control/tenancy.h)
// and each tenant's reads of jobs (control/job_queries.h), on a real SQLite store.
#include "control/tenancy.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/clock.h"
#include "control/job_queries.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/sqlite_store.h"

namespace weft {
namespace {

using ::testing::HasSubstr;

class FixedClock : public Clock {
 public:
  TimeMs NowMs() const override { return 5000; }
};

class TenancyServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/weft-tenancy-unit-XXXXXX";
    dir_ = mkdtemp(tmpl);
    store_ = std::move(*SqliteStore::Open(dir_ + "/weft.db"));
    tenancy_ = std::make_unique<Tenancy>(*store_, clock_);
    for (const char* name : {"a", "b"}) {
      TenantRecord t;
      t.name = name;
      ASSERT_TRUE(tenancy_->Create(&t).ok());
    }
  }
  void TearDown() override {
    tenancy_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  // Stores job `id` of `tenant` with one metric point and a final model.
  void AddJob(const std::string& id, const std::string& tenant) {
    JobRecord job;
    job.id = id;
    job.tenant = tenant;
    job.name = id;
    job.created_ms = clock_.NowMs();
    ASSERT_TRUE(store_->CreateJob(job, "submitted").ok());
    MetricRecord point;
    point.step = 1;
    ASSERT_TRUE(store_->AppendMetrics(id, {point}).ok());
    ModelRecord model;
    model.kind = "final";
    ASSERT_TRUE(store_->PutModel(id, model).ok());
  }
  static Caller TenantCaller(const std::string& tenant) { return Caller{false, tenant, "t"}; }

  std::string dir_;
  FixedClock clock_;
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<Tenancy> tenancy_;
};

TEST_F(TenancyServiceTest, ATenantIsStampedAndATokenIsIssuedOnlyForOneThatExists) {
  absl::StatusOr<TenantRecord> a = tenancy_->Get("a");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->created_ms, 5000);
  TenantRecord again;
  again.name = "a";
  EXPECT_TRUE(absl::IsAlreadyExists(tenancy_->Create(&again)));

  EXPECT_TRUE(absl::IsNotFound(tenancy_->IssueToken("nobody").status()));
  EXPECT_TRUE(absl::IsNotFound(tenancy_->ListTokens("nobody").status()));
  absl::StatusOr<IssuedToken> issued = tenancy_->IssueToken("a");
  ASSERT_TRUE(issued.ok()) << issued.status();
  EXPECT_EQ(issued->first.tenant, "a");
  EXPECT_EQ(issued->first.created_ms, 5000);
  // Only the digest is stored.
  EXPECT_NE(issued->first.sha256, issued->second);
  auto listed = tenancy_->ListTokens("a");
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].id, issued->first.id);
  EXPECT_TRUE(tenancy_->ListTokens("b")->empty());
}

TEST_F(TenancyServiceTest, ANamesFilesAreRemovedWhenItsTenantGoesAndAgainBeforeANewOneTakesIt) {
  std::vector<std::string> removed;
  absl::Status fails = absl::OkStatus();
  tenancy_->SetFileRemover([&](const std::string& tenant) {
    removed.push_back(tenant);
    return fails;
  });
  TenantRecord taken;
  taken.name = "a";
  EXPECT_TRUE(absl::IsAlreadyExists(tenancy_->Create(&taken)));
  EXPECT_TRUE(removed.empty()) << "the files of tenant a, which exists, are its own";

  ASSERT_TRUE(tenancy_->Delete("b").ok());
  EXPECT_EQ(removed, std::vector<std::string>{"b"});
  // A failure to remove them after the deletion is not the caller's: the next Create retries.
  fails = absl::PermissionDeniedError("cannot remove /data/tenants/c");
  TenantRecord c;
  c.name = "c";
  absl::Status refused = tenancy_->Create(&c);
  EXPECT_TRUE(absl::IsPermissionDenied(refused)) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("files an earlier tenant of that name left"));
  EXPECT_TRUE(absl::IsNotFound(tenancy_->Get("c").status())) << "nothing stored";
  ASSERT_TRUE(tenancy_->Delete("a").ok()) << "the files' error is only logged";
  fails = absl::OkStatus();
  ASSERT_TRUE(tenancy_->Create(&c).ok());
  EXPECT_EQ(removed, (std::vector<std::string>{"b", "c", "a", "c"}));
}

TEST_F(TenancyServiceTest, ATokenAuthenticatesItsTenantUntilItIsRevoked) {
  absl::StatusOr<IssuedToken> issued = tenancy_->IssueToken("a");
  ASSERT_TRUE(issued.ok());
  absl::StatusOr<Caller> caller = tenancy_->Authenticate("Bearer " + issued->second);
  ASSERT_TRUE(caller.ok()) << caller.status();
  EXPECT_FALSE(caller->admin);
  EXPECT_EQ(caller->tenant, "a");
  EXPECT_EQ(caller->token_id, issued->first.id);

  EXPECT_THAT(tenancy_->Authenticate("").status().message(), HasSubstr("missing bearer token"));
  EXPECT_TRUE(absl::IsUnauthenticated(tenancy_->Authenticate("Basic xyz").status()));
  EXPECT_TRUE(absl::IsUnauthenticated(tenancy_->Authenticate("Bearer weft_nope").status()));
  // Tenant b cannot revoke a's token by its id.
  EXPECT_FALSE(tenancy_->RevokeToken("b", issued->first.id).ok());
  EXPECT_TRUE(tenancy_->Authenticate("Bearer " + issued->second).ok());
  ASSERT_TRUE(tenancy_->RevokeToken("a", issued->first.id).ok());
  EXPECT_THAT(tenancy_->Authenticate("Bearer " + issued->second).status().message(),
              HasSubstr("revoked"));
}

TEST_F(TenancyServiceTest, RotatingTheAdminTokenWritesTheNewOneAndRevokesEveryOther) {
  absl::StatusOr<std::optional<std::string>> first =
      EnsureAdminToken(*store_, dir_, clock_.NowMs());
  ASSERT_TRUE(first.ok() && first->has_value());
  ASSERT_TRUE(tenancy_->Authenticate("Bearer " + **first)->admin);
  const std::string path = dir_ + "/admin.token";
  absl::StatusOr<IssuedToken> rotated = tenancy_->RotateAdminToken(path);
  ASSERT_TRUE(rotated.ok()) << rotated.status();
  std::string on_disk;
  std::getline(std::ifstream(path), on_disk);
  EXPECT_EQ(on_disk, rotated->second);
  EXPECT_EQ(std::filesystem::status(path).permissions(),
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  EXPECT_TRUE(tenancy_->Authenticate("Bearer " + rotated->second)->admin);
  EXPECT_TRUE(absl::IsUnauthenticated(tenancy_->Authenticate("Bearer " + **first).status()));
  // Another start finds a live admin token and makes none.
  EXPECT_FALSE(EnsureAdminToken(*store_, dir_, clock_.NowMs())->has_value());
}

TEST_F(TenancyServiceTest, EveryReadOfAnotherTenantsJobIsNotFoundAndTheAdminReadsAll) {
  AddJob("job-a", "a");
  AddJob("job-b", "b");
  JobQueries jobs(*store_);
  const Caller a = TenantCaller("a"), admin{true, "", "root"};

  EXPECT_TRUE(jobs.Find(a, "job-a").ok());
  EXPECT_TRUE(jobs.Snapshot(a, "job-a", 10).ok());
  EXPECT_EQ(jobs.Metrics(a, "job-a", 0, 10)->total, 1);
  EXPECT_EQ(jobs.Models(a, "job-a")->size(), 1u);
  // b's job answers as a job that does not exist: the same code as an unknown id.
  for (const std::string& id : {std::string("job-b"), std::string("job-none")}) {
    EXPECT_TRUE(absl::IsNotFound(jobs.Find(a, id).status())) << id;
    EXPECT_TRUE(absl::IsNotFound(jobs.Snapshot(a, id, 10).status())) << id;
    EXPECT_TRUE(absl::IsNotFound(jobs.Metrics(a, id, 0, 10).status())) << id;
    EXPECT_TRUE(absl::IsNotFound(jobs.Models(a, id).status())) << id;
  }
  auto mine = jobs.List(a, JobPage{});
  ASSERT_TRUE(mine.ok());
  ASSERT_EQ(mine->size(), 1u);
  EXPECT_EQ((*mine)[0].id, "job-a");

  EXPECT_TRUE(jobs.Find(admin, "job-b").ok());
  EXPECT_EQ(jobs.List(admin, JobPage{})->size(), 2u);
  EXPECT_EQ(jobs.Active()->size(), 2u);
}

}  // namespace
}  // namespace weft
