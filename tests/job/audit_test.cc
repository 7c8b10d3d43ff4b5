// The data audit's check (job/audit.h): exact epochs pass; a sample trained twice or never, a
// gap in the steps, a record that is not one, each fails it; a roll-back and a torn record are
// accounted for and do not.
#include "job/audit.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>
#include <sstream>

namespace weft {
namespace {

using ::testing::HasSubstr;

// A step record over samples [first, first + count).
std::string Step(int64_t step, int64_t epoch, int64_t first, int64_t count) {
  std::vector<int64_t> idx(static_cast<size_t>(count));
  std::iota(idx.begin(), idx.end(), first);
  return AuditStepRecord(step, epoch, idx.data(), count);
}

AuditReport Check(const std::string& text) {
  std::istringstream in(text);
  absl::StatusOr<AuditReport> r = CheckAudit(in);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : AuditReport{};
}

const std::string kHead = std::string(kAuditHeader) + "\n";

TEST(AuditTest, TwoExactEpochsPass) {
  std::string a = kHead + AuditResumeRecord(0) + AuditEpochRecord(1, 10) + Step(1, 1, 0, 4) +
                  Step(2, 1, 4, 4) + Step(3, 1, 8, 2) + AuditEpochRecord(2, 10) + Step(4, 2, 5, 5) +
                  Step(5, 2, 0, 5);
  AuditReport r = Check(a);
  EXPECT_TRUE(r.exact());
  ASSERT_EQ(r.epochs.size(), 2u);
  EXPECT_EQ(r.epochs[0].once, 10);
  EXPECT_EQ(r.epochs[1].once, 10);
  EXPECT_FALSE(r.epochs[1].partial);
  EXPECT_EQ(r.steps_applied, 5);
  EXPECT_EQ(r.steps_rolled_back, 0);
}

TEST(AuditTest, StepsAfterTheCheckpointResumedFromAreRolledBack) {
  // Steps 3 and 4 ran after the checkpoint of step 2 and were lost with the gang; the restart
  // trains samples 4 … 9 again, at another world size, and that is the lineage.
  std::string a = kHead + AuditResumeRecord(0) + AuditEpochRecord(1, 10) + Step(1, 1, 0, 2) +
                  Step(2, 1, 2, 2) + Step(3, 1, 4, 2) + Step(4, 1, 6, 2) + AuditResumeRecord(2) +
                  AuditEpochRecord(1, 10) + Step(3, 1, 4, 3) + Step(4, 1, 7, 3);
  AuditReport r = Check(a);
  EXPECT_TRUE(r.exact()) << (r.problems.empty() ? "" : r.problems[0]);
  EXPECT_EQ(r.steps_applied, 4);
  EXPECT_EQ(r.steps_rolled_back, 2);
  EXPECT_EQ(r.epochs[0].once, 10);
}

TEST(AuditTest, ATornRecordIsRolledBackAndTheLastEpochMayBePartial) {
  std::string torn = Step(3, 1, 4, 2);
  torn = torn.substr(0, torn.size() - 3);  // killed while writing it
  std::string a = kHead + AuditResumeRecord(0) + AuditEpochRecord(1, 10) + Step(1, 1, 0, 2) +
                  Step(2, 1, 2, 2) + torn + "\n" + AuditResumeRecord(2) + Step(3, 1, 4, 2);
  AuditReport r = Check(a);
  EXPECT_TRUE(r.exact());
  EXPECT_EQ(r.torn_records, 1);
  EXPECT_EQ(r.steps_rolled_back, 1);
  ASSERT_EQ(r.epochs.size(), 1u);
  EXPECT_TRUE(r.epochs[0].partial);
  EXPECT_EQ(r.epochs[0].missing, 4);
  // Without its '\n' at the end of the file, too.
  AuditReport end = Check(kHead + AuditEpochRecord(1, 10) + Step(1, 1, 0, 2) + torn);
  EXPECT_EQ(end.torn_records, 1);
  EXPECT_EQ(end.steps_applied, 1);
}

TEST(AuditTest, ASampleTrainedTwiceOrNeverFailsTheEpoch) {
  std::string twice = kHead + AuditEpochRecord(1, 6) + Step(1, 1, 0, 4) + Step(2, 1, 3, 3) +
                      AuditEpochRecord(2, 6) + Step(3, 2, 0, 6);
  AuditReport r = Check(twice);
  EXPECT_FALSE(r.exact());
  EXPECT_EQ(r.epochs[0].twice, 1);
  EXPECT_EQ(r.epochs[0].once, 5);
  EXPECT_TRUE(r.epochs[1].exact());
  std::string never =
      kHead + AuditEpochRecord(1, 6) + Step(1, 1, 0, 5) + AuditEpochRecord(2, 6) + Step(2, 2, 0, 6);
  AuditReport n = Check(never);
  EXPECT_FALSE(n.exact());
  EXPECT_EQ(n.epochs[0].missing, 1);
  EXPECT_FALSE(n.epochs[0].partial) << "only the last epoch may end early";
  EXPECT_FALSE(Check(kHead + AuditEpochRecord(1, 4) + Step(1, 1, 2, 4)).exact())
      << "indices 4 and 5 are outside a 4-sample epoch";
}

TEST(AuditTest, GapsAndRecordsThatAreNotRecordsAreProblems) {
  AuditReport gap = Check(kHead + AuditEpochRecord(1, 4) + Step(1, 1, 0, 2) + Step(3, 1, 2, 2));
  ASSERT_FALSE(gap.exact());
  EXPECT_THAT(gap.problems[0], HasSubstr("step 3 where step 2 was due"));
  AuditReport junk = Check(kHead + "step x epoch\n" + AuditEpochRecord(1, 2) + Step(1, 1, 0, 2));
  ASSERT_FALSE(junk.exact());
  EXPECT_THAT(junk.problems[0], HasSubstr("line 2: not an audit record"));
  AuditReport skipped = Check(kHead + AuditEpochRecord(1, 2) + Step(1, 1, 0, 2) +
                              AuditEpochRecord(3, 2) + Step(2, 3, 0, 2));
  ASSERT_FALSE(skipped.exact());
  EXPECT_THAT(skipped.problems[0], HasSubstr("no applied step trained epoch 2"));
}

TEST(AuditTest, NotAnAuditOrTooLargeIsRefused) {
  std::istringstream empty(""), other("hello\n"),
      huge(kHead + AuditEpochRecord(1, kAuditMaxSamples + 1));
  EXPECT_FALSE(CheckAudit(empty).ok());
  EXPECT_THAT(std::string(CheckAudit(other).status().message()), HasSubstr("not a weft audit"));
  EXPECT_THAT(std::string(CheckAudit(huge).status().message()), HasSubstr("at most"));
  EXPECT_TRUE(absl::IsNotFound(CheckAuditFile("/nonexistent/audit.log").status()));
}

}  // namespace
}  // namespace weft
