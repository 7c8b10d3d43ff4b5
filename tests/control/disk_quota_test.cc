// Tenants' disk quotas (control/disk_quota.h): what counts, and what a tenant over its quota gets
// (its active jobs halted with the reason, its submissions and resumes refused) while other
// tenants go on.
#include "control/disk_quota.h"

#include <unistd.h>

#include <fstream>

#include "common/deep_tree.h"
#include "control/controller_fixture.h"

namespace weft {
namespace {

using ::testing::HasSubstr;

class DiskQuotaTest : public ControllerTest {
 protected:
  void SetUp() override {
    ControllerTest::SetUp();
    for (const char* name : {"default", "other"}) {
      TenantRecord t;
      t.name = name;
      ASSERT_TRUE(store_->CreateTenant(t).ok());
    }
    // 1 MiB for every tenant; usage kept for 10 s of the manual clock.
    quota_ = std::make_unique<DiskQuota>(*store_, JobLayout(dir_), DiskQuota::TenantDir(), clock_,
                                         DiskQuotaOptions{1, 10000});
    disk_quota_ = quota_.get();
    MakeController();
  }
  void TearDown() override {
    controller_.reset();
    quota_.reset();
    ControllerTest::TearDown();
  }
  // Writes `bytes` of data to `path` (blocks really allocated, not a sparse file).
  static void WriteBytes(const std::string& path, int64_t bytes) {
    std::ofstream out(path, std::ios::binary);
    out << std::string(static_cast<size_t>(bytes), 'x');
    ASSERT_TRUE(out.good()) << path;
  }
  int64_t Used(const std::string& tenant) { return *quota_->UsedBytes(tenant, 0); }

  std::unique_ptr<DiskQuota> quota_;
};

TEST_F(DiskQuotaTest, EachInodeCountsOnceAndNoLinkIsFollowed) {
  const std::string id = Submit();
  const int64_t base = Used("default");
  EXPECT_GT(base, 0) << "the job's directory and spec take blocks";
  EXPECT_EQ(Used("other"), 0);

  const std::string job_dir = controller_->layout().JobDir(id);
  WriteBytes(job_dir + "/big", 256 << 10);
  EXPECT_GE(Used("default") - base, 256 << 10);
  const int64_t with_file = Used("default");
  // A second name for the same content takes nothing more.
  ASSERT_EQ(link((job_dir + "/big").c_str(), (job_dir + "/logs/again").c_str()), 0);
  EXPECT_EQ(Used("default"), with_file);
  // A symbolic link to a file elsewhere counts as the link, not as what it points at.
  WriteBytes(dir_ + "/elsewhere", 1 << 20);
  ASSERT_EQ(symlink((dir_ + "/elsewhere").c_str(), (job_dir + "/link").c_str()), 0);
  EXPECT_LT(Used("default") - with_file, 64 << 10);

  // Checks use what was measured up to max_age_ms ago; Forget measures afresh.
  const int64_t measured = Used("default");
  WriteBytes(job_dir + "/more", 256 << 10);
  EXPECT_EQ(*quota_->UsedBytes("default", 10000), measured);
  clock_.Advance(10001);
  EXPECT_GT(*quota_->UsedBytes("default", 10000), measured);
  quota_->Forget("default");
  EXPECT_GT(*quota_->UsedBytes("default", 10000), measured);
}

TEST_F(DiskQuotaTest, ATenantOverItsQuotaIsHaltedAndRefusedUntilItFreesSpace) {
  const std::string running = Submit();
  controller_->Tick();
  ASSERT_EQ(State(running), JobState::kStarting);
  const std::string queued = Submit();
  std::vector<FieldError> errors;
  auto others = controller_->Submit(kManifest, "other", &errors);
  ASSERT_TRUE(others.ok()) << others.status();
  controller_->Tick();
  // Under the quota nothing happens.
  controller_->EnforceDiskQuotas();
  EXPECT_EQ(State(running), JobState::kStarting);
  EXPECT_EQ(State(queued), JobState::kQueued);

  // The running job's checkpoints take the tenant past its 1 MiB.
  const std::string checkpoints = controller_->layout().CheckpointDir(running);
  ASSERT_TRUE(MakeDirs(checkpoints).ok());
  WriteBytes(checkpoints + "/ckpt-0000000001.pt", 2 << 20);
  controller_->EnforceDiskQuotas();
  for (const std::string& id : {running, queued}) {
    EXPECT_EQ(State(id), JobState::kHalted) << id;
    EXPECT_THAT(Reason(id), HasSubstr("halted: tenant 'default' uses 2."));
    EXPECT_THAT(Reason(id), HasSubstr("of its 1.0 MiB disk quota"));
  }
  EXPECT_THAT(executor_.stopped, ::testing::Contains(running));
  EXPECT_EQ(State(others->id), JobState::kQueued) << "another tenant is not held back";

  // Submissions and resumes are refused, saying why; nothing is stored.
  auto refused = controller_->Submit(kManifest, "default", &errors);
  EXPECT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("weft delete JOB"));
  EXPECT_EQ(store_->ListJobs("default")->size(), 2u);
  EXPECT_TRUE(absl::IsResourceExhausted(controller_->Resume(queued)));

  // Deleting the job that holds the space lets the tenant go on at once.
  ASSERT_TRUE(controller_->Delete(running).ok());
  EXPECT_TRUE(controller_->Resume(queued).ok());
  EXPECT_EQ(State(queued), JobState::kQueued);
  EXPECT_FALSE(Submit().empty());
}

// A program that nests 20 directories of 250-character names and writes at the bottom: the old
// walk by absolute path counted none of it (lstat: ENAMETOOLONG).
TEST_F(DiskQuotaTest, WhatANestedDirectoryWriterWroteIsCountedAndHaltsItsJob) {
  const std::string id = Submit();
  controller_->Tick();
  ASSERT_TRUE(testing::MakeDeepTree(controller_->layout().JobDir(id), 20, 250, 2 << 20));
  EXPECT_GE(Used("default"), 2 << 20);
  controller_->EnforceDiskQuotas();
  EXPECT_EQ(State(id), JobState::kHalted);
  EXPECT_THAT(Reason(id), HasSubstr("halted: tenant 'default' uses 2."));
}

// Nesting past what the walk descends: the tenant's usage cannot be measured, so it is over its
// quota, and says why; another tenant goes on.
TEST_F(DiskQuotaTest, ATenantWhoseFilesCannotBeMeasuredCountsAsOverItsQuota) {
  const std::string id = Submit();
  std::vector<FieldError> errors;
  auto other = controller_->Submit(kManifest, "other", &errors);
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_TRUE(testing::MakeDeepTree(controller_->layout().JobDir(id), 200, 4, 4096));
  controller_->EnforceDiskQuotas();
  EXPECT_EQ(State(id), JobState::kHalted);
  EXPECT_THAT(Reason(id), HasSubstr("the disk usage of tenant 'default' cannot be measured ("));
  EXPECT_THAT(Reason(id), HasSubstr("nested deeper than 128 directories"));
  EXPECT_THAT(Reason(id), HasSubstr("so it counts as over its 1.0 MiB disk quota"));
  EXPECT_EQ(State(other->id), JobState::kQueued);
  auto refused = controller_->Submit(kManifest, "default", &errors);
  EXPECT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  // Deleting the job removes the tree however deep, and the tenant is measurable again.
  ASSERT_TRUE(controller_->Delete(id).ok());
  EXPECT_TRUE(quota_->Usage("default", 0)->unmeasured.empty());
  EXPECT_FALSE(Submit().empty());
}

// A delete whose files cannot all be removed: the job is gone, its files still count until a
// later weftd removes them at its start.
TEST_F(DiskQuotaTest, FilesADeleteCouldNotRemoveStillCountUntilTheyAreGone) {
  const std::string id = Submit();
  WriteBytes(controller_->layout().JobDir(id) + "/two-mib", 2 << 20);
  env_.FailRemovals("/deleted/default/" + id, 1);
  absl::Status deleted = controller_->Delete(id);
  EXPECT_TRUE(absl::IsInternal(deleted)) << deleted;
  EXPECT_THAT(deleted.message(), HasSubstr("deleted but not all of its files"));
  EXPECT_TRUE(absl::IsNotFound(store_->GetJob(id).status()));
  EXPECT_GE(Used("default"), 2 << 20);
  std::vector<FieldError> errors;
  EXPECT_TRUE(
      absl::IsResourceExhausted(controller_->Submit(kManifest, "default", &errors).status()));

  MakeController();  // weftd restarts
  ASSERT_TRUE(controller_->Recover().ok());
  EXPECT_LT(Used("default"), 64 << 10);
  EXPECT_FALSE(std::filesystem::exists(controller_->layout().DeletedDir("default") + "/" + id));
}

// A manifest padded with comments is kept as submitted in the shared store: it counts.
TEST_F(DiskQuotaTest, AManifestsBytesInTheStoreCountCommentsIncluded) {
  const int64_t before = Used("default");
  Submit(std::string(kManifest) + "# " + std::string(600 << 10, 'x') + "\n");
  EXPECT_GE(Used("default") - before, 600 << 10);
}

TEST_F(DiskQuotaTest, TheAdminsQuotaForATenantOverridesWeftdsAndZeroMeansNone) {
  TenantRecord t = *store_->GetTenant("default");
  t.disk_quota_mb = 4;
  ASSERT_TRUE(store_->UpdateTenant(t).ok());
  EXPECT_EQ(quota_->QuotaBytes(*store_->GetTenant("default")), 4 << 20);
  EXPECT_EQ(quota_->QuotaBytes(*store_->GetTenant("other")), 1 << 20);
  const std::string id = Submit();
  WriteBytes(controller_->layout().JobDir(id) + "/two-mib", 2 << 20);
  clock_.Advance(10001);  // past what the submission measured
  EXPECT_TRUE(quota_->CheckRoom("default", 0).ok());
  absl::Status more = quota_->CheckRoom("default", 3 << 20);
  EXPECT_TRUE(absl::IsResourceExhausted(more)) << more;
  EXPECT_THAT(more.message(), HasSubstr("3.0 MiB more is over it"));
  EXPECT_TRUE(absl::IsNotFound(quota_->CheckRoom("nobody", 0)));

  DiskQuota unlimited(*store_, JobLayout(dir_), nullptr, clock_, DiskQuotaOptions{0, 0});
  EXPECT_EQ(unlimited.QuotaBytes(*store_->GetTenant("other")), 0);
  EXPECT_TRUE(unlimited.CheckRoom("other", int64_t{1} << 40).ok());
}

}  // namespace
}  // namespace weft
