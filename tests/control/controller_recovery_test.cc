// The controller after a weftd restart (control/recovery.cc), driven step by step
// (controller_fixture.h): jobs that held resources are requeued, a live learner of the current
// attempt is adopted, and a job whose learner finished unseen is completed — on its own
// attempt's final model only.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "control/controller_fixture.h"

namespace weft {
namespace {

using ::testing::HasSubstr;
TEST_F(ControllerTest, RecoverRequeuesJobsThatHeldResources) {
  std::string running = Submit();
  controller_->Tick();
  controller_->OnRegister(running, 0, 1, 1, 0, {});
  clock_.Advance(1000);
  std::string queued = Submit();
  // weftd "restarts": a new controller and executor over the same store; attempt 1's learner
  // died with the old weftd.
  executor_.running.clear();
  MakeController();
  ASSERT_TRUE(controller_->Recover().ok());
  EXPECT_EQ(State(running), JobState::kQueued);
  EXPECT_THAT(Reason(running), HasSubstr("gone after a weftd restart"));
  EXPECT_THAT(Reason(running), HasSubstr("resumes from its latest checkpoint"));
  EXPECT_EQ(State(queued), JobState::kQueued);
  controller_->Tick();
  // The requeued job keeps its place in the queue: it was submitted first.
  EXPECT_EQ(State(running), JobState::kStarting);
  EXPECT_EQ(State(queued), JobState::kQueued);
  EXPECT_EQ(store_->GetJob(running)->attempt, 2);
  // The learner of attempt 1 is fenced off.
  EXPECT_FALSE(controller_->OnRegister(running, 0, 1, 1, 0, {}).accepted);
}

TEST_F(ControllerTest, RecoverAdoptsALiveLearnerOfTheCurrentAttempt) {
  std::string id = Submit();
  controller_->Tick();
  controller_->OnRegister(id, 0, 1, 4242, 0, {});
  executor_.adoptable.insert(4242);
  MakeController();
  ASSERT_TRUE(controller_->Recover().ok());
  EXPECT_EQ(State(id), JobState::kRunning) << "adopted, not requeued";
  ASSERT_EQ(executor_.adopted.size(), 1u);
  EXPECT_EQ(executor_.adopted[0].attempt, 1);
  EXPECT_EQ(controller_->OnHeartbeat(id, 0, 1, {}), ReportAnswer::kKeepRunning);
  // It finishes under the new weftd; its exit status is unknown but its report decides.
  ASSERT_TRUE(controller_->OnCommitModel(id, 1, Model(id, "final", 0.95)).ok());
  EXPECT_TRUE(
      controller_->OnFinished(id, 0, 1, true, "target met: test_accuracy 0.9500 >= 0.9").ok());
  LearnerExit e;
  e.job_id = id;
  e.attempt = 1;
  e.status_unknown = true;
  executor_.exits.push_back(e);
  controller_->Tick();
  EXPECT_EQ(State(id), JobState::kCompleted);
  EXPECT_EQ(executor_.launches.size(), 1u) << "never a second copy";
}

TEST_F(ControllerTest, RecoverCompletesAJobWhoseLearnerFinishedWhileNoWeftdSawItsExit) {
  // The learner committed its final model and reported finished; the previous weftd died before
  // it reaped the exit, so the report (held in memory) is gone with it. The final model in the
  // store says training ended: the job completes and no second attempt retrains it.
  std::string id = Submit();
  controller_->Tick();
  controller_->OnRegister(id, 0, 1, 4242, 0, {});
  ASSERT_TRUE(controller_->OnCommitModel(id, 1, Model(id, "final", 0.93)).ok());
  ASSERT_TRUE(controller_->OnFinished(id, 0, 1, true, "budget exhausted: 1 epochs").ok());
  std::string other = Submit();  // never started: still requeued
  executor_.running.clear();
  MakeController();
  ASSERT_TRUE(controller_->Recover().ok());
  EXPECT_EQ(State(id), JobState::kCompleted);
  EXPECT_THAT(Reason(id), HasSubstr("final model (epoch 1, test_accuracy 0.9300) is committed"));
  EXPECT_EQ(store_->GetJob(id)->attempt, 1);
  EXPECT_EQ(State(other), JobState::kQueued);
  controller_->Tick();
  EXPECT_EQ(executor_.launches.back().job_id, other) << "the completed job is not started again";
}

// A final model an earlier attempt committed before it failed is not this attempt's: a job whose
// learners are gone after a weftd restart (say, the host rebooted) resumes rather than completes.
TEST_F(ControllerTest, RecoverDoesNotCompleteAJobOnAnEarlierAttemptsFinalModel) {
  std::string id = Submit();
  controller_->Tick();
  controller_->OnRegister(id, 0, 1, 4242, 0, {});
  ASSERT_TRUE(controller_->OnCommitModel(id, 1, Model(id, "final", 0.93)).ok());
  executor_.Exit(id, 1, 1);  // failed after committing it, before reporting finished
  controller_->Tick();
  ASSERT_EQ(State(id), JobState::kQueued) << Reason(id);
  clock_.Advance(5000);
  controller_->Tick();
  ASSERT_EQ(State(id), JobState::kStarting);
  controller_->OnRegister(id, 0, 2, 4242, 0, {});
  ASSERT_EQ(State(id), JobState::kRunning);
  executor_.running.clear();  // the host went down with weftd and the learner
  MakeController();
  ASSERT_TRUE(controller_->Recover().ok());
  EXPECT_EQ(State(id), JobState::kQueued) << Reason(id);
  EXPECT_THAT(Reason(id), HasSubstr("the learners of attempt 2 are gone"));
}

}  // namespace
}  // namespace weft
