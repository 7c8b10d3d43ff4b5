// The shared Store tests of GPU devices and GPU time (see store_test_suite.h): a learner's devices
// and placement time round-trip, a job's GPU time of learners that left is counted per tenant,
// and a deleted job's stays its tenant's. Included by store_tests.h.
#pragma once

#include "store/store_test_suite.h"

namespace weft {

TEST_P(StoreTest, ALearnersGpusAndTheJobsGpuTimeRoundTrip) {
  JobRecord r = NewJob("job-g", "t");
  ASSERT_TRUE(store_->CreateJob(r, "submitted").ok());
  r.state = JobState::kPlaced;
  r.learners = {{"n1", 0, 0, {0, 3}, 5000}, {"n2", 0, 1, {}, 5000}};
  r.gpu_ms = 1234;
  r.learner_ms = 4321;
  ASSERT_TRUE(store_->TransitionJob(r, JobState::kQueued).ok());
  Reopen();
  absl::StatusOr<JobRecord> got = store_->GetJob("job-g");
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->learners.size(), 2u);
  EXPECT_EQ(got->learners[0].gpus, (std::vector<int>{0, 3}));
  EXPECT_EQ(got->learners[0].since_ms, 5000);
  EXPECT_TRUE(got->learners[1].gpus.empty());
  EXPECT_EQ(got->gpu_ms, 1234);
  // 2 devices for 1.5 s on top of what left.
  EXPECT_EQ(got->GpuMs(6500), 1234 + 2 * 1500);
  // The service it attained: 2 learners for 1.5 s on top of those that left.
  EXPECT_EQ(got->learner_ms, 4321);
  EXPECT_EQ(got->LearnerMs(6500), 4321 + 2 * 1500);
}

TEST_P(StoreTest, AJobsGpuTimeIsItsTenantsAndStaysItsTenantsWhenTheJobIsDeleted) {
  TenantRecord t;
  t.name = "t";
  ASSERT_TRUE(store_->CreateTenant(t).ok());
  JobRecord a = NewJob("job-a", "t"), b = NewJob("job-b", "t"), other = NewJob("job-o", "u");
  a.gpu_ms = 1000;
  b.gpu_ms = 250;
  other.gpu_ms = 7;
  for (const JobRecord& r : {a, b, other}) ASSERT_TRUE(store_->CreateJob(r, "s").ok());
  EXPECT_EQ(store_->CountJobs("t")->gpu_ms, 1250);
  EXPECT_EQ(store_->GetTenant("t")->deleted_jobs_gpu_ms, 0);
  ASSERT_TRUE(store_->DeleteJob("job-a").ok());
  EXPECT_EQ(store_->CountJobs("t")->gpu_ms, 250);
  EXPECT_EQ(store_->GetTenant("t")->deleted_jobs_gpu_ms, 1000);
  // A tenant's update leaves what its deleted jobs held alone.
  t.weight = 2;
  ASSERT_TRUE(store_->UpdateTenant(t).ok());
  Reopen();
  EXPECT_EQ(store_->GetTenant("t")->deleted_jobs_gpu_ms, 1000);
  EXPECT_EQ(store_->CountJobs("u")->gpu_ms, 7);
}

}  // namespace weft
