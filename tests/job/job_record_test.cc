// A job's GPU time and attained service (job/job.h): each learner counts from its placement until
// it leaves the job — its attempt ends (ClearGang) or an elastic job's membership goes on without
// it.
#include <gtest/gtest.h>

#include "job/job.h"

namespace weft {
namespace {

TEST(JobRecordTest, GpuTimeCountsEachLearnersDevicesFromPlacementUntilItLeaves) {
  JobRecord r;
  r.learners = {{"n1", 0, 0, {0, 1}, 1000}, {"n1", 0, 1, {2}, 3000}, {"n2", 0, 2, {}, 1000}};
  EXPECT_EQ(r.GpuMs(500), 0) << "nothing before a learner's placement";
  EXPECT_EQ(r.GpuMs(4000), 2 * 3000 + 1 * 1000);
  // Learner 1 leaves at 5000 (a shrink): its time is kept, the others go on.
  r.SetLearners({r.learners[0], r.learners[2]}, 5000);
  EXPECT_EQ(r.gpu_ms, 2000);
  EXPECT_EQ(r.GpuMs(6000), 2000 + 2 * 5000);
  // The attempt ends at 7000: everything is counted, nothing more accrues.
  r.ClearGang(7000);
  EXPECT_TRUE(r.learners.empty());
  EXPECT_EQ(r.gpu_ms, 2000 + 2 * 6000);
  EXPECT_EQ(r.GpuMs(9000), r.gpu_ms);
  // Clearing again counts nothing twice.
  r.ClearGang(9000);
  EXPECT_EQ(r.gpu_ms, 2000 + 2 * 6000);
}

// The service a job attained (JobRecord::LearnerMs, what least-attained-service policies order
// by): every learner's time from its placement until it leaves, devices or not, over attempts.
TEST(JobRecordTest, AttainedServiceCountsEachLearnersTimeOverEveryAttempt) {
  JobRecord r;
  r.learners = {{"n1", 0, 0, {0}, 1000}, {"n2", 0, 1, {}, 3000}};
  EXPECT_EQ(r.LearnerMs(500), 0) << "nothing before a learner's placement";
  EXPECT_EQ(r.LearnerMs(4000), 3000 + 1000);
  r.SetLearners({r.learners[0]}, 5000);  // learner 1 leaves after 2 s
  EXPECT_EQ(r.learner_ms, 2000);
  EXPECT_EQ(r.LearnerMs(6000), 2000 + 5000);
  r.ClearGang(7000);  // the attempt ends (a preemption)
  EXPECT_EQ(r.learner_ms, 2000 + 6000);
  EXPECT_EQ(r.LearnerMs(20000), 8000) << "nothing accrues while it waits";
  r.learners = {{"n1", 0, 0, {}, 20000}};  // the next attempt
  EXPECT_EQ(r.LearnerMs(21000), 9000);
  // A record written before placements were timed holds learners without since_ms: none count.
  r.learners = {{"n1", 0, 0, {}, 0}};
  EXPECT_EQ(r.LearnerMs(21000), 8000);
}

}  // namespace
}  // namespace weft
