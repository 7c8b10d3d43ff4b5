// The shared Store tests of experiments and their trials (see store_test_suite.h). Included by
// store_tests.h.
#pragma once

#include "store/store_test_suite.h"

namespace weft {

inline ExperimentRecord NewExperiment(const std::string& id, const std::string& tenant = "t",
                                      TimeMs created = 1000) {
  ExperimentRecord e;
  e.id = id;
  e.tenant = tenant;
  e.name = "search-" + id;
  e.reason = "submitted";
  e.manifest = "kind: Experiment\n";
  e.search_state = "{\"version\": 1}";
  e.created_ms = created;
  e.updated_ms = created;
  return e;
}

TEST_P(StoreTest, AnExperimentRoundTripsAndIsListedByTenantAndState) {
  ExperimentRecord a = NewExperiment("exp-a", "t", 1000);
  a.best_metric = 0.5;  // written at creation as given
  ASSERT_TRUE(store_->CreateExperiment(a).ok());
  ASSERT_TRUE(store_->CreateExperiment(NewExperiment("exp-b", "u", 2000)).ok());
  ASSERT_TRUE(store_->CreateExperiment(NewExperiment("exp-c", "t", 3000)).ok());
  EXPECT_TRUE(absl::IsAlreadyExists(store_->CreateExperiment(NewExperiment("exp-a"))));
  EXPECT_TRUE(absl::IsNotFound(store_->GetExperiment("exp-x").status()));

  auto got = store_->GetExperiment("exp-a");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->tenant, "t");
  EXPECT_EQ(got->name, "search-exp-a");
  EXPECT_EQ(got->state, ExperimentState::kRunning);
  EXPECT_EQ(got->manifest, "kind: Experiment\n");
  EXPECT_EQ(got->search_state, "{\"version\": 1}");
  EXPECT_EQ(got->revision, 1);
  EXPECT_EQ(got->best_metric, 0.5);
  EXPECT_FALSE(got->deliver_met_ms.has_value());

  auto of_t = store_->ListExperiments("t");
  ASSERT_TRUE(of_t.ok());
  ASSERT_EQ(of_t->size(), 2u);
  EXPECT_EQ((*of_t)[0].id, "exp-a");
  EXPECT_EQ((*of_t)[1].id, "exp-c");
  EXPECT_EQ(store_->ListExperiments()->size(), 3u);

  ExperimentRecord c = *store_->GetExperiment("exp-c");
  c.state = ExperimentState::kCompleted;
  c.reason = "the search is done";
  ASSERT_TRUE(store_->UpdateExperiment(c).ok());
  auto active = store_->ListActiveExperiments();
  ASSERT_TRUE(active.ok());
  ASSERT_EQ(active->size(), 2u);
  EXPECT_EQ((*active)[0].id, "exp-a");
  EXPECT_EQ((*active)[1].id, "exp-b");
  // Counted per tenant: every experiment, and those RUNNING.
  auto counts = store_->CountExperiments("t");
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->total, 2);
  EXPECT_EQ(counts->running, 1);
  EXPECT_EQ(store_->CountExperiments("u")->running, 1);
  EXPECT_EQ(store_->CountExperiments("nobody")->total, 0);
  Reopen();
  EXPECT_EQ(store_->GetExperiment("exp-c")->state, ExperimentState::kCompleted);
}

// Two writers that read the same revision: the second is refused and loses nothing of the
// first's.
TEST_P(StoreTest, AnExperimentIsWrittenOnlyOverTheRevisionItWasReadAt) {
  ASSERT_TRUE(store_->CreateExperiment(NewExperiment("exp-a")).ok());
  ExperimentRecord first = *store_->GetExperiment("exp-a");
  ExperimentRecord second = first;
  first.search_state = "{\"version\": 1, \"trials_started\": 1}";
  first.best_job = "exp-a-t0";
  first.best_metric = 0.81;
  first.deliver_met_ms = 5000;
  first.updated_ms = 5000;
  ASSERT_TRUE(store_->UpdateExperiment(first).ok());
  EXPECT_EQ(first.revision, 2);
  second.search_state = "{\"version\": 1, \"trials_started\": 7}";
  absl::Status refused = store_->UpdateExperiment(second);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  EXPECT_EQ(second.revision, 1);

  auto got = store_->GetExperiment("exp-a");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->revision, 2);
  EXPECT_EQ(got->search_state, first.search_state);
  EXPECT_EQ(got->best_job, "exp-a-t0");
  EXPECT_EQ(got->best_metric, 0.81);
  EXPECT_EQ(got->deliver_met_ms, 5000);
  EXPECT_EQ(got->updated_ms, 5000);
  EXPECT_EQ(got->manifest, "kind: Experiment\n") << "what a creation sets is never rewritten";
  ExperimentRecord unknown = NewExperiment("exp-x");
  EXPECT_TRUE(absl::IsNotFound(store_->UpdateExperiment(unknown)));
}

// A trial's job is created with the search state that names it, or neither is written.
TEST_P(StoreTest, ATrialsJobIsCreatedWithTheSearchStateThatNamesIt) {
  ASSERT_TRUE(store_->CreateExperiment(NewExperiment("exp-a")).ok());
  ExperimentRecord e = *store_->GetExperiment("exp-a");
  JobRecord trial = NewJob("exp-a-t0", "t", 2000);
  trial.experiment = "exp-a";
  trial.trial = 0;
  e.search_state = "{\"trials_started\": 1}";
  ASSERT_TRUE(store_->StartTrial(e, trial, "trial 0 of exp-a").ok());
  EXPECT_EQ(e.revision, 2);

  // A stale writer starts nothing: no job, no state.
  ExperimentRecord stale = e;
  stale.revision = 1;
  stale.search_state = "{\"trials_started\": 9}";
  JobRecord other = NewJob("exp-a-t9", "t", 2000);
  other.experiment = "exp-a";
  other.trial = 9;
  EXPECT_TRUE(absl::IsFailedPrecondition(store_->StartTrial(stale, other, "trial 9")));
  EXPECT_TRUE(absl::IsNotFound(store_->GetJob("exp-a-t9").status()));
  // A job id taken: the state is not written either.
  ExperimentRecord again = e;
  again.search_state = "{\"trials_started\": 2}";
  EXPECT_TRUE(absl::IsAlreadyExists(store_->StartTrial(again, trial, "trial 0 again")));
  EXPECT_EQ(store_->GetExperiment("exp-a")->search_state, "{\"trials_started\": 1}");
  // A job that is not the experiment's trial is refused.
  JobRecord stray = NewJob("job-x", "t", 2000);
  EXPECT_TRUE(absl::IsInvalidArgument(store_->StartTrial(again, stray, "stray")));

  JobRecord second = NewJob("exp-a-t1", "t", 3000);
  second.experiment = "exp-a";
  second.trial = 1;
  ASSERT_TRUE(store_->StartTrial(e, second, "trial 1 of exp-a").ok());
  auto trials = store_->ListTrials("exp-a");
  ASSERT_TRUE(trials.ok()) << trials.status();
  ASSERT_EQ(trials->size(), 2u);
  EXPECT_EQ((*trials)[0].id, "exp-a-t0");
  EXPECT_EQ((*trials)[1].trial, 1);
  EXPECT_EQ((*trials)[1].experiment, "exp-a");
  EXPECT_EQ(store_->History("exp-a-t0")->front().reason, "trial 0 of exp-a");
  EXPECT_TRUE(absl::IsNotFound(store_->ListTrials("exp-x").status()));

  // The link is the job's for life: a write of the record without it keeps it.
  JobRecord unlinked = *store_->GetJob("exp-a-t0");
  unlinked.experiment.clear();
  unlinked.trial = -1;
  unlinked.progress.epoch = 2;
  ASSERT_TRUE(store_->UpdateJob(unlinked).ok());
  unlinked.state = JobState::kHalted;
  ASSERT_TRUE(store_->TransitionJob(unlinked, JobState::kQueued).ok());
  Reopen();
  auto kept = store_->GetJob("exp-a-t0");
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->experiment, "exp-a");
  EXPECT_EQ(kept->trial, 0);
  EXPECT_EQ(kept->progress.epoch, 2);
  EXPECT_EQ(store_->GetJob("job-x").status().code(), absl::StatusCode::kNotFound);
}

// An experiment goes only after its trials' jobs, and a tenant only after its experiments.
TEST_P(StoreTest, AnExperimentIsDeletedAfterItsTrialsAndBeforeItsTenant) {
  TenantRecord t;
  t.name = "t";
  ASSERT_TRUE(store_->CreateTenant(t).ok());
  ASSERT_TRUE(store_->CreateExperiment(NewExperiment("exp-a", "t")).ok());
  ExperimentRecord e = *store_->GetExperiment("exp-a");
  JobRecord trial = NewJob("exp-a-t0", "t", 2000);
  trial.experiment = "exp-a";
  trial.trial = 0;
  ASSERT_TRUE(store_->StartTrial(e, trial, "trial 0").ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(store_->DeleteExperiment("exp-a")));
  ASSERT_TRUE(store_->DeleteJob("exp-a-t0").ok());
  absl::Status tenant_refused = store_->DeleteTenant("t");
  EXPECT_TRUE(absl::IsFailedPrecondition(tenant_refused)) << tenant_refused;
  EXPECT_NE(tenant_refused.message().find("1 experiment"), absl::string_view::npos);
  ASSERT_TRUE(store_->DeleteExperiment("exp-a").ok());
  EXPECT_TRUE(absl::IsNotFound(store_->DeleteExperiment("exp-a")));
  EXPECT_TRUE(absl::IsNotFound(store_->GetExperiment("exp-a").status()));
  EXPECT_TRUE(store_->DeleteTenant("t").ok());
}

}  // namespace weft
