// Experiments driven through the real controller, store and ASHA searcher, with fake learners:
// trials are jobs of the tenant, a promoted trial resumes from the checkpoint it wrote at the end
// of its rung with the next rung's budget, a trial not promoted stays halted, a failed trial ranks
// last without a retry, and a controller rebuilt before every round (a weftd restarted) makes
// exactly the promotions of an uninterrupted one.
#include "control/experiment_controller.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_replace.h"
#include "control/controller_fixture.h"

namespace weft {
namespace {

using ::testing::HasSubstr;

// ASHA over four trials with η = 2: rungs of 1, 2 and 4 epochs, two trials at once.
constexpr char kExperiment[] = R"(
kind: Experiment
name: mlp-search
job:
  model: {architecture: mlp}
  data: {train_samples: 512, test_samples: 100}
  training: {epochs: 4, batch_size: 64}
  resources: {cpus: 1, memory_mb: 512}
  max_restarts: 0
search:
  space:
    training.learning_rate: {loguniform: [0.001, 0.1]}
  eta: 2
  max_trials: 4
  max_concurrent_trials: 2
  seed: 7
)";

class ExperimentControllerTest : public ControllerTest {
 protected:
  void SetUp() override {
    ControllerTest::SetUp();
    experiments_ = std::make_unique<ExperimentController>(*store_, *controller_, clock_);
  }

  // What happened to the trials, in order: "t1 -> rung 1 (2 epochs)" for each promotion.
  std::vector<std::string> promotions_;

  // A round of the experiments, then of the jobs (learners start, exits are settled).
  void Round(bool restart) {
    if (restart) {
      // A weftd restarted: new controllers over the same store.
      experiments_.reset();
      controller_.reset();
      MakeController();
      ASSERT_TRUE(controller_->Recover().ok());
      experiments_ = std::make_unique<ExperimentController>(*store_, *controller_, clock_);
    }
    experiments_->Round();
    clock_.Advance(1000);
    controller_->Tick();
  }

  // Every trial whose learner runs trains to the end of its budget: its test accuracy at the
  // end is `accuracy[trial] + 0.01 * epochs`; it checkpoints at the end when its spec says.
  void TrainRunningTrials(const std::string& experiment, const std::map<int, double>& accuracy) {
    const absl::StatusOr<std::vector<JobRecord>> trials = store_->ListTrials(experiment);
    ASSERT_TRUE(trials.ok()) << trials.status();
    for (const JobRecord& job : *trials) {
      if (job.state != JobState::kStarting) continue;
      const auto spec = controller_->Spec(job);
      ASSERT_TRUE(spec.ok());
      const int epochs = (*spec)->training.epochs;
      const int64_t attempt = job.attempt;
      RegisterDecision d = controller_->OnRegister(job.id, 0, attempt, 4242, 0, {});
      ASSERT_TRUE(d.accepted) << job.id;
      if (job.progress.epoch > 0) {
        // Promoted: it resumes from the checkpoint of its last rung, not from the start.
        ASSERT_FALSE(d.resume_from.empty()) << job.id << " would train again from the start";
        promotions_.push_back(
            absl::StrCat("t", job.trial, " -> ", epochs, " epochs from ", job.progress.epoch));
      }
      const int64_t step = 8LL * epochs;
      MetricRecord m;
      m.step = step;
      m.epoch = epochs;
      m.test_accuracy = accuracy.at(job.trial) + 0.01 * epochs;
      m.test_loss = 1 - *m.test_accuracy;
      JobProgress p{epochs, epochs, step, step, 512LL * epochs};
      controller_->OnMetrics(job.id, 0, attempt, {m}, p);
      if ((*spec)->checkpoint.at_end) {
        const std::string dir = controller_->layout().CheckpointDir(job.id);
        ASSERT_TRUE(MakeDirs(dir).ok());
        const std::string path = CheckpointPath(dir, step);
        ASSERT_TRUE(WriteFileAtomic(path, "0123456789").ok());
        ASSERT_TRUE(
            controller_->OnCommitCheckpoint(job.id, attempt, {step, epochs, path, 10, 0, 0.1})
                .ok());
      }
      ASSERT_TRUE(
          controller_->OnCommitModel(job.id, attempt, Model(job.id, kFinalModel, *m.test_accuracy))
              .ok());
      ASSERT_TRUE(controller_->OnFinished(job.id, 0, attempt, true, "budget spent").ok());
      executor_.Exit(job.id, attempt, 0);
    }
  }

  // Runs the experiment to its end; every round restarts weftd first when `restart`.
  ExperimentRecord RunToTheEnd(const std::string& id, const std::map<int, double>& accuracy,
                               bool restart) {
    for (int round = 0; round < 40; ++round) {
      Round(restart);
      if (store_->GetExperiment(id)->state != ExperimentState::kRunning) break;
      TrainRunningTrials(id, accuracy);
    }
    return *store_->GetExperiment(id);
  }

  std::string SubmitExperiment(const std::string& manifest = kExperiment) {
    std::vector<FieldError> errors;
    auto e = experiments_->Submit(manifest, "default", &errors);
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? e->id : "";
  }

  std::unique_ptr<ExperimentController> experiments_;
};

// Rung 0 (1 epoch) of trials 0 and 1 promotes 1 (the top ⌊2/2⌋), trial 2 starts in its place;
// with trial 3's result rung 0's top ⌊4/2⌋ = 2 holds trial 2 too, which is promoted; rung 1's
// results (1: 0.82, 2: 0.72) promote trial 1 to the top rung (4 epochs), where it completes.
TEST_F(ExperimentControllerTest, AshasTrialsAreJobsPromotedFromTheirCheckpointsToTheBest) {
  const std::string id = SubmitExperiment();
  ASSERT_FALSE(id.empty());
  EXPECT_THAT(id, ::testing::StartsWith("exp-"));
  Round(false);
  auto trials = *store_->ListTrials(id);
  ASSERT_EQ(trials.size(), 2u) << "max_concurrent_trials";
  EXPECT_EQ(trials[0].tenant, "default");
  EXPECT_EQ(trials[0].name, "mlp-search-t0");
  EXPECT_EQ(trials[0].state, JobState::kStarting);
  EXPECT_THAT(store_->History(trials[0].id)->front().reason, HasSubstr("training.learning_rate="));

  const ExperimentRecord e = RunToTheEnd(id, {{0, 0.6}, {1, 0.8}, {2, 0.7}, {3, 0.5}}, false);
  EXPECT_EQ(e.state, ExperimentState::kCompleted) << e.reason;
  EXPECT_THAT(e.reason, HasSubstr("the search is done: 4 trials"));
  EXPECT_EQ(promotions_, (std::vector<std::string>{"t1 -> 2 epochs from 1", "t2 -> 2 epochs from 1",
                                                   "t1 -> 4 epochs from 2"}));
  trials = *store_->ListTrials(id);
  ASSERT_EQ(trials.size(), 4u);
  EXPECT_EQ(e.best_job, trials[1].id);
  EXPECT_DOUBLE_EQ(*e.best_metric, 0.84);
  EXPECT_EQ(trials[1].state, JobState::kCompleted) << "the top rung does not wait";
  for (int t : {0, 2, 3}) {
    EXPECT_EQ(trials[t].state, JobState::kHalted) << t;
    EXPECT_THAT(trials[t].reason, HasSubstr("waits for the search to promote it"));
  }
  // A promotion is in the trial's own history, with its new budget.
  bool resumed = false;
  const std::vector<StateEvent> history = *store_->History(trials[2].id);
  for (const StateEvent& ev : history) {
    resumed = resumed || ev.reason == "resumed with a budget of 2 epochs (was 1)";
  }
  EXPECT_TRUE(resumed);
}

// With its rounds on a thread of their own and a period longer than the test, a search still
// moves at once: its submission submits the first trials, and trials whose jobs end their rung
// (HALTED, on the job feed) have the promoted one resumed and a new one submitted.
TEST_F(ExperimentControllerTest, ATrialEndingItsRungWakesTheRoundsRatherThanWaitingAPeriod) {
  experiments_->StartRounds(/*period_ms=*/3'600'000);
  const std::string id = SubmitExperiment();
  // Polls the trials for up to 30 s (a wake takes milliseconds) until `done` holds.
  auto eventually = [&](const std::function<bool(const std::vector<JobRecord>&)>& done) {
    for (int i = 0; i < 3000; ++i) {
      if (done(*store_->ListTrials(id))) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  };
  ASSERT_TRUE(eventually([](const auto& trials) { return trials.size() == 2; }))
      << "the submission did not start the first trials";
  controller_->Tick();  // their learners start
  TrainRunningTrials(id, {{0, 0.6}, {1, 0.8}});
  controller_->Tick();  // their exits are settled: both HALTED at the end of rung 0
  // Trial 1 (the top ⌊2/2⌋ of rung 0) is resumed into rung 1, and trial 2 submitted.
  EXPECT_TRUE(eventually([](const auto& trials) {
    return trials.size() == 3 && trials[1].state == JobState::kQueued &&
           trials[1].progress.epochs_total == 2;
  })) << "the trials' ends did not wake the rounds";
  experiments_->StopRounds();
}

// A weftd restarted before every round (new controllers over the same store) makes the same
// promotions and ends with the same best as one that ran throughout.
TEST_F(ExperimentControllerTest, ASearchRebuiltFromTheStoreEveryRoundPromotesTheSameTrials) {
  const std::string id = SubmitExperiment();
  const ExperimentRecord e = RunToTheEnd(id, {{0, 0.6}, {1, 0.8}, {2, 0.7}, {3, 0.5}}, true);
  EXPECT_EQ(e.state, ExperimentState::kCompleted) << e.reason;
  EXPECT_EQ(promotions_, (std::vector<std::string>{"t1 -> 2 epochs from 1", "t2 -> 2 epochs from 1",
                                                   "t1 -> 4 epochs from 2"}));
  EXPECT_EQ(e.best_job, (*store_->ListTrials(id))[1].id);
}

// A trial whose learner fails ranks below every result: it is not retried and never promoted.
TEST_F(ExperimentControllerTest, AFailedTrialRanksLastAndIsNotRetried) {
  const std::string id = SubmitExperiment();
  Round(false);
  auto trials = *store_->ListTrials(id);
  ASSERT_EQ(trials.size(), 2u);
  ASSERT_TRUE(controller_->OnRegister(trials[0].id, 0, 1, 4242, 0, {}).accepted);
  ASSERT_TRUE(controller_->OnFinished(trials[0].id, 0, 1, false, "loss is NaN").ok());
  executor_.Exit(trials[0].id, 1, 2);
  const ExperimentRecord e = RunToTheEnd(id, {{1, 0.3}, {2, 0.2}, {3, 0.1}}, false);
  EXPECT_EQ(e.state, ExperimentState::kCompleted) << e.reason;
  trials = *store_->ListTrials(id);
  EXPECT_EQ(trials[0].state, JobState::kFailed);
  EXPECT_EQ(trials[0].attempt, 1) << "a failed trial is not started again";
  for (const std::string& p : promotions_) EXPECT_THAT(p, ::testing::Not(HasSubstr("t0 ")));
  EXPECT_EQ(e.best_job, trials[1].id);
}

// A trial whose job a person deleted fails: the search goes on without waiting for it.
TEST_F(ExperimentControllerTest, ATrialWhoseJobWasDeletedFailsAndTheSearchGoesOn) {
  const std::string id = SubmitExperiment();
  Round(false);
  auto trials = *store_->ListTrials(id);
  ASSERT_EQ(trials.size(), 2u);
  ASSERT_TRUE(controller_->Delete(trials[0].id).ok());
  const ExperimentRecord e = RunToTheEnd(id, {{1, 0.3}, {2, 0.2}, {3, 0.1}}, false);
  EXPECT_EQ(e.state, ExperimentState::kCompleted) << e.reason;
  EXPECT_THAT(e.reason, HasSubstr("4 trials"));
  EXPECT_EQ(store_->ListTrials(id)->size(), 3u);
  EXPECT_EQ(e.best_job, trials[1].id);
}

// The experiment's targets are its trials': the first trial to deliver gives the experiment its
// delivered model, and one that meets the complete target ends the search and halts the rest.
TEST_F(ExperimentControllerTest, TheCompleteTargetEndsTheSearchAndHaltsTheOtherTrials) {
  const std::string id =
      SubmitExperiment(std::string(kExperiment) + "targets: {deliver: 0.7, complete: 0.9}\n");
  Round(false);
  auto trials = *store_->ListTrials(id);
  ASSERT_EQ(trials.size(), 2u);
  ASSERT_TRUE(controller_->OnRegister(trials[1].id, 0, 1, 4242, 0, {}).accepted);
  ASSERT_TRUE(
      controller_->OnCommitModel(trials[1].id, 1, Model(trials[1].id, "delivered", 0.75)).ok());
  Round(false);
  ExperimentRecord e = *store_->GetExperiment(id);
  EXPECT_EQ(e.delivered_job, trials[1].id);
  EXPECT_TRUE(e.deliver_met_ms.has_value());
  ASSERT_TRUE(
      controller_->OnCommitModel(trials[1].id, 1, Model(trials[1].id, kFinalModel, 0.93)).ok());
  ASSERT_TRUE(controller_->OnFinished(trials[1].id, 0, 1, true, "target met").ok());
  executor_.Exit(trials[1].id, 1, 0);
  controller_->Tick();
  EXPECT_EQ(State(trials[1].id), JobState::kCompleted) << Reason(trials[1].id);
  Round(false);
  e = *store_->GetExperiment(id);
  EXPECT_EQ(e.state, ExperimentState::kCompleted);
  EXPECT_THAT(e.reason, HasSubstr("met the complete target"));
  EXPECT_EQ(State(trials[0].id), JobState::kHalted);
  EXPECT_THAT(Reason(trials[0].id), HasSubstr("its experiment " + id + " ended"));
  EXPECT_EQ(store_->ListTrials(id)->size(), 2u) << "no trial starts after the end";
}

// A person halts an experiment (its training trials halt with it, and no round starts another),
// resumes it (the trials it halted mid-rung go on; the search ends as it would have), and deletes
// it with its trials' jobs.
TEST_F(ExperimentControllerTest, HaltResumeAndDeleteActOnTheTrialsToo) {
  const std::string id = SubmitExperiment();
  Round(false);
  auto trials = *store_->ListTrials(id);
  ASSERT_EQ(trials.size(), 2u);
  ASSERT_TRUE(experiments_->Halt(id).ok());
  EXPECT_EQ(store_->GetExperiment(id)->state, ExperimentState::kHalted);
  EXPECT_EQ(store_->GetExperiment(id)->reason, "halted by user");
  for (const JobRecord& t : trials) {
    EXPECT_EQ(State(t.id), JobState::kHalted) << t.id;
    executor_.Exit(t.id, t.attempt, 0, SIGTERM);  // the learner goes, as told
  }
  Round(false);
  EXPECT_EQ(store_->ListTrials(id)->size(), 2u) << "a halted experiment starts no trial";
  EXPECT_TRUE(absl::IsFailedPrecondition(experiments_->Halt(id)));

  ASSERT_TRUE(experiments_->Resume(id).ok());
  EXPECT_EQ(store_->GetExperiment(id)->state, ExperimentState::kRunning);
  for (const JobRecord& t : trials) EXPECT_NE(State(t.id), JobState::kHalted) << t.id;
  const ExperimentRecord e = RunToTheEnd(id, {{0, 0.6}, {1, 0.8}, {2, 0.7}, {3, 0.5}}, false);
  EXPECT_EQ(e.state, ExperimentState::kCompleted) << e.reason;
  EXPECT_EQ(promotions_, (std::vector<std::string>{"t1 -> 2 epochs from 1", "t2 -> 2 epochs from 1",
                                                   "t1 -> 4 epochs from 2"}));
  EXPECT_TRUE(absl::IsFailedPrecondition(experiments_->Resume(id)));

  trials = *store_->ListTrials(id);
  ASSERT_EQ(trials.size(), 4u);
  ASSERT_TRUE(experiments_->Delete(id).ok());
  EXPECT_TRUE(absl::IsNotFound(store_->GetExperiment(id).status()));
  for (const JobRecord& t : trials) {
    EXPECT_TRUE(absl::IsNotFound(store_->GetJob(t.id).status())) << t.id;
  }
  EXPECT_TRUE(absl::IsNotFound(experiments_->Halt(id)));
}

// Every write of an experiment is on the event feed the SSE streams serve, as stored: its
// submission, each trial started, its end, and its deletion.
TEST_F(ExperimentControllerTest, EveryWriteOfAnExperimentIsPublishedAsStored) {
  const int64_t before = controller_->events().LastSeq();
  const std::string id = SubmitExperiment();
  experiments_->Round();  // two trials start
  ASSERT_TRUE(experiments_->Halt(id).ok());
  ASSERT_TRUE(experiments_->Delete(id).ok());
  EventHub::Batch b =
      controller_->events().Wait(before, absl::ZeroDuration(), [](const JobEvent& e) {
        return e.type == JobEventType::kExperiment || e.type == JobEventType::kExperimentDeleted;
      });
  std::vector<std::string> seen;
  for (const JobEvent& e : b.events) {
    ASSERT_TRUE(e.experiment.has_value());
    EXPECT_EQ(e.experiment->id, id);
    EXPECT_EQ(e.tenant, "default");
    EXPECT_TRUE(e.job.empty()) << "not a job's event: no job stream shows it";
    seen.push_back(absl::StrCat(JobEventTypeName(e.type), " ",
                                ExperimentStateName(e.experiment->state), " ",
                                e.experiment->reason));
  }
  ASSERT_GE(seen.size(), 5u);
  EXPECT_EQ(seen.front(), "experiment RUNNING submitted");
  EXPECT_EQ(seen[1], "experiment RUNNING submitted");  // the first trial's write
  EXPECT_EQ(seen[seen.size() - 2], "experiment HALTED halted by user");
  EXPECT_EQ(seen.back(), "experiment_deleted HALTED halted by user");
}

// A tenant at one of its limits is refused, with the flag named, and nothing is stored.
TEST_F(ExperimentControllerTest, ATenantAtItsExperimentLimitsIsRefusedAndNothingIsStored) {
  experiments_ = std::make_unique<ExperimentController>(
      *store_, *controller_, clock_,
      ExperimentLimits{.tenant_max_experiments = 2, .tenant_max_running_experiments = 1});
  std::vector<FieldError> errors;
  const std::string a = SubmitExperiment();
  auto refused = experiments_->Submit(kExperiment, "default", &errors);
  ASSERT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("1 experiments running, as many as weftd runs for a tenant at once "
                        "(--tenant-max-running-experiments)"));
  EXPECT_EQ(store_->ListExperiments()->size(), 1u);

  ASSERT_TRUE(experiments_->Halt(a).ok());
  const std::string b = SubmitExperiment();  // a no longer runs
  ASSERT_TRUE(experiments_->Halt(b).ok());
  refused = experiments_->Submit(kExperiment, "default", &errors);
  ASSERT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("has 2 experiments, as many as weftd keeps for a tenant "
                        "(--tenant-max-experiments)"));
  EXPECT_EQ(store_->ListExperiments()->size(), 2u);

  // A resume counts as one more running.
  ASSERT_TRUE(experiments_->Resume(a).ok());
  const absl::Status resumed = experiments_->Resume(b);
  EXPECT_TRUE(absl::IsFailedPrecondition(resumed)) << resumed;
  EXPECT_THAT(std::string(resumed.message()), HasSubstr("--tenant-max-running-experiments"));
  EXPECT_EQ(store_->GetExperiment(b)->state, ExperimentState::kHalted);
}

// A manifest that cannot be an experiment is refused with the field, and nothing is stored.
TEST_F(ExperimentControllerTest, ABadManifestIsRefusedWithItsFieldAndNothingStored) {
  std::vector<FieldError> errors;
  auto e = experiments_->Submit(absl::StrReplaceAll(kExperiment, {{"eta: 2", "eta: 1"}}), "default",
                                &errors);
  ASSERT_FALSE(e.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(e.status()));
  ASSERT_FALSE(errors.empty());
  EXPECT_EQ(errors[0].field, "search.eta");
  EXPECT_TRUE(store_->ListExperiments()->empty());
}

}  // namespace
}  // namespace weft
