// The controller's lifecycle, driven step by step (controller_fixture.h): submission, targets,
// exits and restarts, checkpoints, fencing, liveness, halt and resume, deletion. Recovery after
// a weftd restart is in controller_recovery_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <limits>

#include "control/controller_fixture.h"

namespace weft {
namespace {

using ::testing::HasSubstr;

// A broken policy: every waiting job on the first node, whether it fits or not.
class OverCommittingPolicy : public scheduler::Policy {
 public:
  std::string Name() const override { return "overcommit"; }
  scheduler::Decisions Schedule(const scheduler::ClusterSnapshot& s) override {
    scheduler::Decisions d;
    for (const auto& j : s.jobs) {
      if (j.Waiting())
        d.placements.push_back({j.job_id, {size_t(j.learners), s.nodes[0].name}, "", {}});
    }
    return d;
  }
};

// One tenant cannot fill the store or the control rounds with jobs: at its limits a submission
// is refused with the reason, nothing is stored, and another tenant submits as before.
TEST_F(ControllerTest, ATenantAtItsJobLimitsIsRefusedWhileAnotherSubmits) {
  TenantRecord other;
  other.name = "other";
  ASSERT_TRUE(store_->CreateTenant(other).ok());
  ControllerOptions o;
  o.data_dir = dir_;
  o.nodes = {scheduler::Node{"local", {2, 4096, 0}, {}, {}, {}}};
  o.coordinator_address = "127.0.0.1:9";
  o.tenant_max_jobs = 3;
  o.tenant_max_active_jobs = 2;
  controller_ = std::make_unique<Controller>(*store_, executor_, policy_, clock_, o);
  const std::string first = Submit(), second = Submit();
  std::vector<FieldError> errors;
  auto refused = controller_->Submit(kManifest, "default", &errors);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("has 2 jobs not yet settled"));
  EXPECT_THAT(refused.status().message(), HasSubstr("--tenant-max-active-jobs"));
  EXPECT_EQ(store_->ListJobs("default")->size(), 2u);
  EXPECT_TRUE(controller_->Submit(kManifest, "other", &errors).ok()) << "another tenant";
  // A settled job no longer counts as active, but is still kept.
  ASSERT_TRUE(controller_->Halt(first).ok());
  EXPECT_FALSE(Submit().empty());
  refused = controller_->Submit(kManifest, "default", &errors);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("has 3 jobs, as many as weftd keeps"));
  // Deleting a finished job makes room in the store.
  ASSERT_TRUE(controller_->Halt(second).ok());
  ASSERT_TRUE(controller_->Delete(first).ok());
  EXPECT_FALSE(Submit().empty());
}

TEST_F(ControllerTest, ARoundThatOverCommitsANodeIsRefusedOutLoud) {
  OverCommittingPolicy bad;
  MakeController(&bad);
  std::string a = Submit();
  clock_.Advance(1);
  std::string b = Submit();  // each asks for the node's 2 cpus
  controller_->Tick();
  EXPECT_TRUE(executor_.launches.empty()) << "nothing of a refused round is applied";
  EXPECT_EQ(State(a), JobState::kQueued);
  EXPECT_EQ(State(b), JobState::kQueued);
  EXPECT_THAT(WaitingReason(b), HasSubstr("weftd refused the scheduler's decision"));
  EXPECT_THAT(WaitingReason(b), HasSubstr("over-commits node local: cpus 4/2"));
  // A sound policy again: the first job starts.
  MakeController();
  controller_->Tick();
  EXPECT_EQ(State(a), JobState::kStarting);
}

// A learner whose training diverged reports NaN: its points are stored all the same, and a NaN
// accuracy never becomes the job's best.
TEST_F(ControllerTest, ADivergedLearnersNaNPointsAreStoredAndNeverTheBest) {
  std::string id = Submit();
  controller_->Tick();
  ASSERT_TRUE(controller_->OnRegister(id, 0, 1, 4242, 0, {}).accepted);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  MetricRecord diverged{10, 1, 1000, nan, 50, nan, nan};
  EXPECT_EQ(controller_->OnMetrics(id, 0, 1, {diverged}, {1, 2, 10, 20, 640}),
            ReportAnswer::kKeepRunning);
  EXPECT_FALSE(store_->GetJob(id)->best_test_accuracy.has_value());
  MetricRecord evaluated{20, 1, 2000, 0.3, 50, 0.5, 0.3};
  EXPECT_EQ(controller_->OnMetrics(id, 0, 1, {evaluated}, {1, 2, 20, 20, 1280}),
            ReportAnswer::kKeepRunning);
  EXPECT_DOUBLE_EQ(*store_->GetJob(id)->best_test_accuracy, 0.5);
  auto page = store_->MetricRange(id, 0, 10);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->points.size(), 2u);
  EXPECT_EQ(page->points[0].step, 10);
  EXPECT_FALSE(page->points[0].test_accuracy.has_value());
}

TEST_F(ControllerTest, HappyPathThroughDeliveredToCompleted) {
  std::string id = Submit();
  EXPECT_EQ(State(id), JobState::kQueued);
  EXPECT_TRUE(std::filesystem::exists(controller_->layout().JobDir(id) + "/spec.json"));
  controller_->Tick();
  EXPECT_EQ(State(id), JobState::kStarting);
  ASSERT_EQ(executor_.launches.size(), 1u);
  const LearnerLaunch& l = executor_.launches[0];
  EXPECT_EQ(l.attempt, 1);
  EXPECT_EQ(l.threads, 2);
  EXPECT_EQ(l.coordinator_address, "127.0.0.1:9");
  ASSERT_EQ(store_->GetJob(id)->learners.size(), 1u);
  EXPECT_EQ(store_->GetJob(id)->learners[0].pid, 4242);
  EXPECT_EQ(store_->GetJob(id)->learners[0].node, "local");

  EXPECT_TRUE(controller_->OnRegister(id, 0, 1, 4242, 0, {}).accepted);
  EXPECT_EQ(State(id), JobState::kRunning);
  JobProgress p{1, 2, 10, 20, 640};
  MetricRecord m;
  m.step = 10;
  m.test_accuracy = 0.85;
  EXPECT_EQ(controller_->OnMetrics(id, 0, 1, {m}, p), ReportAnswer::kKeepRunning);
  EXPECT_DOUBLE_EQ(*store_->GetJob(id)->best_test_accuracy, 0.85);
  EXPECT_EQ(store_->GetJob(id)->progress.step, 10);

  ASSERT_TRUE(controller_->OnCommitModel(id, 1, Model(id, "delivered", 0.85)).ok());
  EXPECT_EQ(State(id), JobState::kDelivered);
  EXPECT_THAT(Reason(id), HasSubstr("deliver target met: test_accuracy 0.8500 >= 0.8"));
  EXPECT_TRUE(store_->GetJob(id)->deliver_met_ms.has_value());

  ASSERT_TRUE(controller_->OnCommitModel(id, 1, Model(id, "final", 0.91)).ok());
  EXPECT_TRUE(store_->GetJob(id)->complete_met_ms.has_value());
  EXPECT_TRUE(
      controller_->OnFinished(id, 0, 1, true, "target met: test_accuracy 0.9100 >= 0.9").ok());
  executor_.Exit(id, 1, 0);
  controller_->Tick();
  EXPECT_EQ(State(id), JobState::kCompleted);
  EXPECT_EQ(Reason(id), "target met: test_accuracy 0.9100 >= 0.9");
  EXPECT_EQ(store_->History(id)->size(), 6u);
  EXPECT_TRUE(store_->GetJob(id)->learners.empty());
}

TEST_F(ControllerTest, TheEventFeedTellsWhatTheStoreRecordsInTheSameOrder) {
  std::string a = Submit();
  clock_.Advance(1);
  std::string b = Submit();
  auto [before, seq0] = *controller_->SnapshotForEvents(a, 10);
  EXPECT_EQ(before.history.size(), 1u);  // QUEUED, published before the snapshot's cursor
  EXPECT_EQ(seq0, 2);                    // a's and b's submissions
  controller_->Tick();                   // a starts; b waits for the node
  ASSERT_TRUE(controller_->OnRegister(a, 0, 1, 4242, 0, {}).accepted);
  MetricRecord m;
  m.step = 10;
  m.test_accuracy = 0.85;
  ASSERT_EQ(controller_->OnMetrics(a, 0, 1, {m}, JobProgress{1, 2, 10, 20, 640}),
            ReportAnswer::kKeepRunning);
  ASSERT_TRUE(controller_->OnCommitModel(a, 1, Model(a, "delivered", 0.85)).ok());
  ASSERT_TRUE(controller_->Delete(b).ok());

  EventHub::Batch batch = controller_->events().Wait(seq0, absl::ZeroDuration(), nullptr);
  std::vector<std::string> seen;
  for (const JobEvent& e : batch.events) {
    seen.push_back(
        absl::StrCat(e.job == a ? "a " : "b ", JobEventTypeName(e.type), " ", JobStateName(e.to)));
    if (e.type == JobEventType::kProgress) {
      EXPECT_EQ(e.progress.step, 10);
      ASSERT_EQ(e.points.size(), 1u);
      EXPECT_DOUBLE_EQ(*e.best_test_accuracy, 0.85);
    }
    if (e.type == JobEventType::kWaiting) {
      EXPECT_THAT(e.reason, HasSubstr("no free node"));
    }
  }
  EXPECT_THAT(seen,
              ::testing::ElementsAre("b waiting QUEUED", "a state PLACED", "a state STARTING",
                                     "a state RUNNING", "a progress RUNNING", "a model RUNNING",
                                     "a state DELIVERED", "b deleted QUEUED"));
  // A snapshot now reflects all of it: a reader from its cursor on has nothing to catch up.
  auto [after, seq1] = *controller_->SnapshotForEvents(a, 10);
  EXPECT_EQ(seq1, batch.last);
  EXPECT_EQ(after.history.size(), 5u);
}

TEST_F(ControllerTest, SecondJobWaitsWithAReasonUntilTheFirstEnds) {
  std::string a = Submit();
  clock_.Advance(1);
  std::string b = Submit();
  controller_->Tick();
  EXPECT_EQ(State(a), JobState::kStarting);
  EXPECT_EQ(State(b), JobState::kQueued);
  EXPECT_THAT(WaitingReason(b), HasSubstr("waiting: no free node has 2 cpus"));
  EXPECT_EQ(controller_->view().WaitingFor(b)->code, scheduler::WaitCode::kNoRoom);
  executor_.Exit(a, 1, 1);
  controller_->Tick();
  EXPECT_EQ(State(a), JobState::kQueued) << "restarting after backoff";
  EXPECT_EQ(State(b), JobState::kStarting);
  EXPECT_EQ(WaitingReason(b), "");
}

TEST_F(ControllerTest, ExitWithoutSuccessFailsWithTheLearnersReason) {
  std::string id = Submit();
  controller_->Tick();
  controller_->OnRegister(id, 0, 1, 1, 0, {});
  EXPECT_TRUE(
      controller_->OnFinished(id, 0, 1, false, "data file not found: /nope/train-images-idx3-ubyte")
          .ok());
  executor_.Exit(id, 1, 2);
  controller_->Tick();
  EXPECT_EQ(State(id), JobState::kFailed);
  EXPECT_EQ(Reason(id), "learner exit code 2: data file not found: /nope/train-images-idx3-ubyte");
}

TEST_F(ControllerTest, ALearnerOverItsMemoryFailsTheJobWithoutARestart) {
  std::string id = Submit(std::string(kManifest) + "max_restarts: 3\n");
  controller_->Tick();
  ASSERT_EQ(executor_.launches.size(), 1u);
  EXPECT_EQ(executor_.launches[0].memory_limit_mb, 1024);  // resources.memory_mb
  controller_->OnRegister(id, 0, 1, 1, 0, {});
  executor_.Exit(id, 1, -1, 9);
  executor_.exits.back().killed_for = "out of memory: 3.1 GiB used, 2.0 GiB requested";
  controller_->Tick();
  EXPECT_EQ(State(id), JobState::kFailed);
  EXPECT_EQ(Reason(id), "learner out of memory: 3.1 GiB used, 2.0 GiB requested");
  EXPECT_EQ(executor_.launches.size(), 1u);
}

TEST_F(ControllerTest, SubmissionRefusesThreadsOverCpusAndStateOverMemory) {
  std::vector<FieldError> errors;
  auto r = controller_->Submit(
      "name: big\nmodel: {architecture: mlp, hidden_units: [65536, 65536]}\n"
      "training: {epochs: 1, threads: 4}\nresources: {cpus: 1, memory_mb: 64}\n",
      "default", &errors);
  EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].field, "training.threads");
  EXPECT_EQ(errors[1].field, "resources.memory_mb");
}

TEST_F(ControllerTest, EachRoundRecordsItsTimeAndTheActiveJobsItRead) {
  EXPECT_EQ(controller_->view().LastRound().rounds, 0);
  Submit();
  Submit();
  controller_->Tick();
  controller_->Tick();
  ClusterView::RoundTime round = controller_->view().LastRound();
  EXPECT_EQ(round.rounds, 2);
  EXPECT_EQ(round.active_jobs, 2);
  EXPECT_GE(round.max_ms, round.last_ms);
  EXPECT_GE(round.last_ms, 0);
}

TEST_F(ControllerTest, CleanExitWithoutFinalModelFails) {
  std::string id = Submit();
  controller_->Tick();
  controller_->OnRegister(id, 0, 1, 1, 0, {});
  EXPECT_TRUE(controller_->OnFinished(id, 0, 1, true, "done").ok());
  executor_.Exit(id, 1, 0);
  controller_->Tick();
  EXPECT_EQ(State(id), JobState::kFailed);
  EXPECT_THAT(Reason(id), HasSubstr("without committing a final model"));
}

TEST_F(ControllerTest, KilledLearnerRestartsWithBackoffUntilMaxRestarts) {
  std::string id = Submit(std::string(kManifest) + "max_restarts: 2\n");
  for (int attempt = 1; attempt <= 3; ++attempt) {
    controller_->Tick();
    ASSERT_EQ(State(id), JobState::kStarting) << "attempt " << attempt;
    EXPECT_EQ(executor_.launches.back().attempt, attempt);
    controller_->OnRegister(id, 0, attempt, 1, 0, {});
    executor_.Exit(id, attempt, -1, 9);
    controller_->Tick();
    if (attempt == 3) break;
    EXPECT_EQ(State(id), JobState::kQueued);
    EXPECT_THAT(Reason(id), HasSubstr("killed by signal 9"));
    EXPECT_THAT(Reason(id), HasSubstr("restart " + std::to_string(attempt) + " of 2"));
    // Backoff: 1 s, then 2 s; the job waits with a reason meanwhile.
    int64_t backoff = 1000 << (attempt - 1);
    clock_.Advance(backoff - 100);
    controller_->Tick();
    EXPECT_EQ(State(id), JobState::kQueued);
    EXPECT_THAT(WaitingReason(id), HasSubstr("restart backoff"));
    clock_.Advance(100);
  }
  EXPECT_EQ(State(id), JobState::kFailed);
  EXPECT_THAT(Reason(id), HasSubstr("gave up after 2 restarts"));
  EXPECT_EQ(store_->GetJob(id)->restarts, 2);
}

TEST_F(ControllerTest, CheckpointsAreKeptPerSpecAndHandedToTheNextAttempt) {
  std::string id = Submit(std::string(kManifest) + "checkpoint: {keep: 2}\n");
  controller_->Tick();
  EXPECT_TRUE(controller_->OnRegister(id, 0, 1, 1, 0, {}).resume_from.empty());
  std::string dir = controller_->layout().JobDir(id) + "/checkpoints";
  ASSERT_TRUE(MakeDirs(dir).ok());
  std::vector<std::string> paths;
  for (int step : {100, 200, 300}) {
    std::string p = CheckpointPath(dir, step);
    ASSERT_TRUE(WriteFileAtomic(p, "0123456789").ok());
    paths.push_back(p);
    ASSERT_TRUE(controller_->OnCommitCheckpoint(id, 1, {step, 1, p, 10, 0, 0.2}).ok());
  }
  // The write times the learner reported, as a histogram by tenant.
  const std::string metrics = MetricsRegistry::Global().Render();
  EXPECT_THAT(metrics,
              HasSubstr("weft_checkpoint_write_duration_seconds_count{tenant=\"default\"} 3\n"));
  EXPECT_THAT(
      metrics,
      HasSubstr(
          "weft_checkpoint_write_duration_seconds_bucket{le=\"0.25\",tenant=\"default\"} 3\n"));
  EXPECT_FALSE(std::filesystem::exists(paths[0])) << "only `keep` checkpoints stay";
  EXPECT_TRUE(std::filesystem::exists(paths[2]));
  EXPECT_EQ(store_->Checkpoints(id)->size(), 2u);
  // Refused: wrong size, a path that is not the one weftd derives for that step (another step's
  // file, a file outside the job, a way out of the job's directory), stale attempt.
  EXPECT_TRUE(
      absl::IsInvalidArgument(controller_->OnCommitCheckpoint(id, 1, {300, 1, paths[2], 5, 0, 0})));
  EXPECT_TRUE(absl::IsInvalidArgument(
      controller_->OnCommitCheckpoint(id, 1, {400, 1, paths[2], 10, 0, 0})));
  EXPECT_TRUE(absl::IsInvalidArgument(
      controller_->OnCommitCheckpoint(id, 1, {400, 1, "/etc/hosts", 10, 0, 0})));
  EXPECT_TRUE(absl::IsInvalidArgument(controller_->OnCommitCheckpoint(
      id, 1, {400, 1, dir + "/../../other/checkpoints/ckpt-0000000400.pt", 10, 0, 0})));
  EXPECT_TRUE(absl::IsFailedPrecondition(
      controller_->OnCommitCheckpoint(id, 9, {300, 1, paths[2], 10, 0, 0})));
  EXPECT_EQ(store_->Checkpoints(id)->size(), 2u);
  // The learner is killed after writing step 400 but before committing it, and in the middle of
  // writing step 500: neither file is the job's; the next attempt starts without them.
  const std::string uncommitted = CheckpointPath(dir, 400);
  const std::string partial = CheckpointPath(dir, 500) + ".tmp.4242";
  ASSERT_TRUE(WriteFileAtomic(uncommitted, "0123456789").ok());
  ASSERT_TRUE(WriteFileAtomic(partial, "01234").ok());

  executor_.Exit(id, 1, -1, 9);
  controller_->Tick();
  EXPECT_THAT(Reason(id), HasSubstr("from the checkpoint at step 300"));
  EXPECT_TRUE(std::filesystem::exists(uncommitted)) << "nothing is removed before the restart";
  clock_.Advance(1000);
  controller_->Tick();
  ASSERT_EQ(State(id), JobState::kStarting);
  EXPECT_FALSE(std::filesystem::exists(uncommitted));
  EXPECT_FALSE(std::filesystem::exists(partial));
  EXPECT_TRUE(std::filesystem::exists(paths[1]));
  EXPECT_TRUE(std::filesystem::exists(paths[2]));
  RegisterDecision d = controller_->OnRegister(id, 0, 2, 1, 0, {});
  ASSERT_TRUE(d.accepted);
  EXPECT_EQ(d.resume_from, (std::vector<std::string>{paths[2], paths[1]}));
}

TEST_F(ControllerTest, HaltedLearnerMayCommitItsLastCheckpoint) {
  std::string id = Submit();
  controller_->Tick();
  controller_->OnRegister(id, 0, 1, 1, 0, {});
  ASSERT_TRUE(controller_->Halt(id).ok());
  std::string p = CheckpointPath(controller_->layout().CheckpointDir(id), 7);
  ASSERT_TRUE(MakeDirs(controller_->layout().JobDir(id) + "/checkpoints").ok());
  ASSERT_TRUE(WriteFileAtomic(p, "abc").ok());
  EXPECT_TRUE(controller_->OnCommitCheckpoint(id, 1, {7, 0, p, 3, 0, 0}).ok());
  executor_.Exit(id, 1, 143);
  ASSERT_TRUE(controller_->Resume(id).ok());
  controller_->Tick();
  EXPECT_EQ(controller_->OnRegister(id, 0, 2, 1, 0, {}).resume_from, (std::vector<std::string>{p}));
}

TEST_F(ControllerTest, AJobResumedRightAfterHaltWaitsForItsHaltedLearners) {
  // A code review's finding: resume within the stop grace ran attempt 2 beside attempt 1, which
  // was still writing the checkpoint attempt 2 should start from.
  std::string id = Submit();
  controller_->Tick();
  controller_->OnRegister(id, 0, 1, 1, 0, {});
  ASSERT_TRUE(controller_->Halt(id).ok());
  ASSERT_TRUE(controller_->Resume(id).ok());
  for (int round = 0; round < 3; ++round) {
    controller_->Tick();
    EXPECT_EQ(State(id), JobState::kQueued);
    EXPECT_EQ(executor_.launches.size(), 1u);
    EXPECT_EQ(WaitingReason(id),
              "waiting: 1 learner of the previous attempt still writing the last checkpoint");
    EXPECT_EQ(controller_->view().WaitingFor(id)->code, scheduler::WaitCode::kCheckpointing);
  }
  std::string p = CheckpointPath(controller_->layout().CheckpointDir(id), 9);
  ASSERT_TRUE(MakeDirs(controller_->layout().CheckpointDir(id)).ok());
  ASSERT_TRUE(WriteFileAtomic(p, "abc").ok());
  EXPECT_TRUE(controller_->OnCommitCheckpoint(id, 1, {9, 0, p, 3, 0, 0}).ok());
  executor_.Exit(id, 1, 143);
  controller_->Tick();
  EXPECT_EQ(State(id), JobState::kStarting);
  ASSERT_EQ(executor_.launches.size(), 2u);
  EXPECT_EQ(executor_.launches.back().attempt, 2);
  EXPECT_EQ(controller_->OnRegister(id, 0, 2, 1, 0, {}).resume_from, (std::vector<std::string>{p}));
}

TEST_F(ControllerTest, StaleAttemptsAreFencedOff) {
  std::string id = Submit();
  controller_->Tick();
  EXPECT_FALSE(controller_->OnRegister(id, 0, /*attempt=*/7, 1, 0, {}).accepted);
  EXPECT_EQ(State(id), JobState::kStarting);
  EXPECT_EQ(controller_->OnMetrics(id, 0, 7, {}, {}), ReportAnswer::kStop);
  EXPECT_TRUE(
      absl::IsFailedPrecondition(controller_->OnCommitModel(id, 7, Model(id, "delivered", 0.99))));
  EXPECT_TRUE(store_->Models(id)->empty());
  EXPECT_FALSE(controller_->OnRegister("job-unknown", 0, 1, 1, 0, {}).accepted);
}

TEST_F(ControllerTest, ModelMustExistWithTheClaimedSizeInsideTheJob) {
  std::string id = Submit();
  controller_->Tick();
  controller_->OnRegister(id, 0, 1, 1, 0, {});
  ModelRecord a = Model(id, "final", 0.5);
  a.bytes = 999;
  EXPECT_TRUE(absl::IsInvalidArgument(controller_->OnCommitModel(id, 1, a)));
  a = Model(id, "final", 0.5);
  a.path = "/etc/passwd";
  EXPECT_TRUE(absl::IsInvalidArgument(controller_->OnCommitModel(id, 1, a)));
  a = Model(id, "weights", 0.5);
  EXPECT_TRUE(absl::IsInvalidArgument(controller_->OnCommitModel(id, 1, a)));
  EXPECT_TRUE(store_->Models(id)->empty());
}

TEST_F(ControllerTest, SilentLearnerIsStoppedAndFailed) {
  std::string id = Submit();
  controller_->Tick();
  controller_->OnRegister(id, 0, 1, 1, 0, {});
  clock_.Advance(30'000);
  EXPECT_EQ(controller_->OnHeartbeat(id, 0, 1, {}), ReportAnswer::kKeepRunning);
  clock_.Advance(59'000);
  controller_->Tick();
  EXPECT_EQ(State(id), JobState::kRunning);
  clock_.Advance(2'000);
  controller_->Tick();
  EXPECT_EQ(State(id), JobState::kQueued);
  EXPECT_THAT(Reason(id), HasSubstr("stopped heartbeating"));
  EXPECT_THAT(Reason(id), HasSubstr("restart 1 of 3 from the beginning"));
  EXPECT_EQ(executor_.stopped, (std::vector<std::string>{id}));
}

TEST_F(ControllerTest, HaltResumeAndTheLearnerIsToldToStop) {
  std::string id = Submit();
  controller_->Tick();
  controller_->OnRegister(id, 0, 1, 1, 0, {});
  ASSERT_TRUE(controller_->Halt(id).ok());
  EXPECT_EQ(State(id), JobState::kHalted);
  EXPECT_EQ(executor_.stopped, (std::vector<std::string>{id}));
  EXPECT_EQ(controller_->OnHeartbeat(id, 0, 1, {}), ReportAnswer::kStop);
  EXPECT_TRUE(absl::IsFailedPrecondition(controller_->Halt(id)));
  executor_.Exit(id, 1, 143);
  controller_->Tick();
  EXPECT_EQ(State(id), JobState::kHalted) << "the exit of a halted job changes nothing";
  ASSERT_TRUE(controller_->Resume(id).ok());
  EXPECT_EQ(State(id), JobState::kQueued);
  controller_->Tick();
  EXPECT_EQ(State(id), JobState::kStarting);
  EXPECT_EQ(executor_.launches.back().attempt, 2);
  EXPECT_TRUE(absl::IsFailedPrecondition(controller_->Resume(id)));
  EXPECT_TRUE(absl::IsNotFound(controller_->Halt("job-nope")));
}

TEST_F(ControllerTest, DeleteRemovesTheJobAndItsFiles) {
  std::string id = Submit();
  controller_->Tick();
  std::string dir = controller_->layout().JobDir(id);
  ASSERT_TRUE(std::filesystem::exists(dir));
  ASSERT_TRUE(controller_->Delete(id).ok());
  EXPECT_TRUE(absl::IsNotFound(store_->GetJob(id).status()));
  EXPECT_FALSE(std::filesystem::exists(dir));
  EXPECT_EQ(executor_.stopped, (std::vector<std::string>{id}));
  EXPECT_TRUE(absl::IsNotFound(controller_->Delete(id)));
}

TEST_F(ControllerTest, AFullDiskAtSubmissionStoresNothing) {
  env_.FailWrites("/spec.json", 1);
  std::vector<FieldError> errors;
  auto job = controller_->Submit(kManifest, "default", &errors);
  ASSERT_FALSE(job.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(job.status())) << job.status();
  EXPECT_THAT(std::string(job.status().message()), HasSubstr("No space left on device"));
  EXPECT_TRUE(store_->ListJobs("")->empty());
  EXPECT_TRUE(std::filesystem::is_empty(dir_ + "/jobs")) << "no half-made job directory";
  // Room again: the same manifest is accepted.
  EXPECT_FALSE(Submit().empty());
}

TEST_F(ControllerTest, RejectsNeverFittingRequestsAndStoresNothing) {
  std::vector<FieldError> errors;
  auto job = controller_->Submit(
      "name: x\nmodel: {architecture: cnn}\ntraining: {epochs: 1}\nresources: {cpus: 3}\n",
      "default", &errors);
  EXPECT_TRUE(absl::IsInvalidArgument(job.status()));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].field, "resources");
  EXPECT_THAT(errors[0].problem, HasSubstr("needs 3 cpus per learner, the largest node has 2"));
  EXPECT_TRUE(store_->ListJobs("")->empty());
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/jobs") &&
               !std::filesystem::is_empty(dir_ + "/jobs"));
}

TEST_F(ControllerTest, ManifestsNameDataSetsTheTenantMayUseAndNeverAHostPath) {
  ASSERT_TRUE(store_->PutDataset({"vision-set", "/srv/vision", "idx", false, {"vision"}, 0}).ok());
  auto submit = [&](const std::string& data, const std::string& tenant) {
    std::vector<FieldError> errors;
    auto job =
        controller_->Submit(std::string(kManifest) + "data: " + data + "\n", tenant, &errors);
    return std::make_pair(job.ok(),
                          errors.empty() ? "" : errors[0].field + ": " + errors[0].problem);
  };
  EXPECT_TRUE(submit("{dataset: fashion-mnist}", "default").first);
  EXPECT_TRUE(submit("{dataset: vision-set}", "vision").first);
  // Another tenant's data set is the same answer as a missing one.
  EXPECT_EQ(submit("{dataset: vision-set}", "default").second,
            "data.dataset: no data set 'vision-set'; weft dataset list shows yours");
  EXPECT_EQ(submit("{dataset: cifar10}", "default").second,
            "data.dataset: no data set 'cifar10'; weft dataset list shows yours");
  EXPECT_THAT(submit("{path: /etc}", "default").second,
              ::testing::StartsWith("data.path: is no longer accepted"));
  EXPECT_EQ(store_->ListJobs("")->size(), 2u) << "nothing stored for the refused ones";
}

TEST_F(ControllerTest, AJobWhoseDataSetWasRemovedFailsWhenItWouldStartAndSaysWhy) {
  ASSERT_TRUE(store_->PutDataset({"scratch", "/srv/scratch", "idx", true, {}, 0}).ok());
  const std::string id = Submit(std::string(kManifest) + "data: {dataset: scratch}\n");
  ASSERT_TRUE(store_->DeleteDataset("scratch").ok());
  controller_->Tick();
  EXPECT_EQ(State(id), JobState::kFailed);
  EXPECT_THAT(Reason(id), HasSubstr("data.dataset: no data set 'scratch'"));
  EXPECT_TRUE(executor_.launches.empty());

  // The learners of a job that may still use its data set are told the data set's directory.
  const std::string ok = Submit();
  controller_->Tick();
  ASSERT_EQ(executor_.launches.size(), 1u);
  EXPECT_EQ(executor_.launches[0].data_dir, dir_ + "/fashion-mnist");
  EXPECT_EQ(State(ok), JobState::kStarting);
}

}  // namespace
}  // namespace weft
