// A job's GPU time (job/job.h): each learner's devices count from its placement until it leaves
// the job — its attempt ends (ClearGang) or an elastic job's membership goes on without it.
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

}  // namespace
}  // namespace weft
