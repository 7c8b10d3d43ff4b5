// The shared Store tests (see store_test_suite.h). Included by each implementation's test file.
#pragma once

#include <limits>

#include "store/store_experiment_tests.h"
#include "store/store_gpu_tests.h"
#include "store/store_test_suite.h"

namespace weft {

TEST_P(StoreTest, CreateAndGetRoundTrip) {
  JobRecord r = NewJob("job-a");
  r.progress.epochs_total = 10;
  ASSERT_TRUE(store_->CreateJob(r, "submitted").ok());
  auto got = store_->GetJob("job-a");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->name, "name-job-a");
  EXPECT_EQ(got->tenant, "default");
  EXPECT_EQ(got->state, JobState::kQueued);
  EXPECT_EQ(got->manifest, "name: x\n");
  EXPECT_EQ(got->progress.epochs_total, 10);
  EXPECT_FALSE(got->best_test_accuracy.has_value());
}

TEST_P(StoreTest, DuplicateIdIsRefused) {
  ASSERT_TRUE(store_->CreateJob(NewJob("job-a"), "submitted").ok());
  EXPECT_TRUE(absl::IsAlreadyExists(store_->CreateJob(NewJob("job-a"), "submitted")));
}

TEST_P(StoreTest, UnknownJobIsNotFound) {
  EXPECT_TRUE(absl::IsNotFound(store_->GetJob("nope").status()));
  EXPECT_TRUE(absl::IsNotFound(store_->History("nope").status()));
  EXPECT_TRUE(absl::IsNotFound(store_->MetricRange("nope", 0, 1).status()));
  EXPECT_TRUE(absl::IsNotFound(store_->AppendMetrics("nope", {MetricRecord{}})));
  EXPECT_TRUE(absl::IsNotFound(store_->PutModel("nope", ModelRecord{})));
  EXPECT_TRUE(absl::IsNotFound(store_->DeleteJob("nope")));
  EXPECT_TRUE(absl::IsNotFound(store_->UpdateJob(NewJob("nope"))));
}

TEST_P(StoreTest, TransitionAppendsHistoryAndChecksTheCurrentState) {
  JobRecord r = NewJob("job-a");
  ASSERT_TRUE(store_->CreateJob(r, "submitted").ok());
  r.state = JobState::kPlaced;
  r.reason = "placed on node local";
  r.updated_ms = 2000;
  r.learners = {{"node-a", 0, 0, {}, 0}, {"node-b", 4242, 3, {}, 0}};
  r.servers = {{"node-b", 4343, 1, "127.0.0.2:4100"}};
  r.generation = 2;
  r.next_learner_id = 4;
  ASSERT_TRUE(store_->TransitionJob(r, JobState::kQueued).ok());
  // Compare-and-set: the stored state is PLACED now, not QUEUED.
  r.state = JobState::kStarting;
  EXPECT_TRUE(absl::IsFailedPrecondition(store_->TransitionJob(r, JobState::kQueued)));
  // Illegal edge.
  r.state = JobState::kCompleted;
  EXPECT_TRUE(absl::IsFailedPrecondition(store_->TransitionJob(r, JobState::kPlaced)));

  auto history = store_->History("job-a");
  ASSERT_TRUE(history.ok());
  ASSERT_EQ(history->size(), 2u);
  EXPECT_FALSE((*history)[0].from.has_value());
  EXPECT_EQ((*history)[0].to, JobState::kQueued);
  EXPECT_EQ((*history)[1].seq, 2);
  EXPECT_EQ((*history)[1].from, JobState::kQueued);
  EXPECT_EQ((*history)[1].to, JobState::kPlaced);
  EXPECT_EQ((*history)[1].reason, "placed on node local");
  EXPECT_EQ((*history)[1].time_ms, 2000);
  auto got = store_->GetJob("job-a");
  EXPECT_EQ(got->state, JobState::kPlaced);
  // A gang's learners round-trip by rank.
  ASSERT_EQ(got->learners.size(), 2u);
  EXPECT_EQ(got->learners[0].node, "node-a");
  EXPECT_EQ(got->learners[1].node, "node-b");
  EXPECT_EQ(got->learners[1].pid, 4242);
  // With their ids, the membership generation and the next id an elastic job's newcomer gets.
  EXPECT_EQ(got->learners[0].id, 0);
  EXPECT_EQ(got->learners[1].id, 3);
  EXPECT_EQ(got->generation, 2);
  EXPECT_EQ(got->next_learner_id, 4);
  // A scale-out parameter-server job's servers round-trip apart from its learners.
  ASSERT_EQ(got->servers.size(), 1u);
  EXPECT_EQ(got->servers[0].pid, 4343);
  EXPECT_EQ(got->servers[0].index, 1);
  EXPECT_EQ(got->servers[0].address, "127.0.0.2:4100");
}

TEST_P(StoreTest, UpdateLeavesStateAndHistoryAlone) {
  JobRecord r = NewJob("job-a");
  ASSERT_TRUE(store_->CreateJob(r, "submitted").ok());
  r.state = JobState::kFailed;  // must be ignored by UpdateJob
  r.progress.step = 42;
  r.best_test_accuracy = 0.5;
  r.deliver_met_ms = 777;
  ASSERT_TRUE(store_->UpdateJob(r).ok());
  auto got = store_->GetJob("job-a");
  EXPECT_EQ(got->state, JobState::kQueued);
  EXPECT_EQ(got->progress.step, 42);
  EXPECT_DOUBLE_EQ(*got->best_test_accuracy, 0.5);
  EXPECT_EQ(*got->deliver_met_ms, 777);
  EXPECT_EQ(store_->History("job-a")->size(), 1u);
}

TEST_P(StoreTest, ListsByTenantInCreationOrder) {
  ASSERT_TRUE(store_->CreateJob(NewJob("job-b", "t1", 2000), "s").ok());
  ASSERT_TRUE(store_->CreateJob(NewJob("job-a", "t1", 1000), "s").ok());
  ASSERT_TRUE(store_->CreateJob(NewJob("job-c", "t2", 1500), "s").ok());
  auto t1 = store_->ListJobs("t1");
  ASSERT_TRUE(t1.ok());
  ASSERT_EQ(t1->size(), 2u);
  EXPECT_EQ((*t1)[0].id, "job-a");
  EXPECT_EQ((*t1)[1].id, "job-b");
  EXPECT_EQ(store_->ListJobs("")->size(), 3u);
  EXPECT_TRUE(store_->ListJobs("t3")->empty());
}

TEST_P(StoreTest, ListsAPageAfterAJob) {
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(store_->CreateJob(NewJob("job-" + std::to_string(i), "t1", 1000 + i), "s").ok());
  }
  ASSERT_TRUE(store_->CreateJob(NewJob("job-other", "t2", 1002), "s").ok());
  auto first = store_->ListJobs("t1", {"", 2});
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->size(), 2u);
  EXPECT_EQ((*first)[1].id, "job-1");
  auto next = store_->ListJobs("t1", {"job-1", 2});
  ASSERT_EQ(next->size(), 2u);
  EXPECT_EQ((*next)[0].id, "job-2");
  EXPECT_EQ((*next)[1].id, "job-3");
  EXPECT_EQ(store_->ListJobs("t1", {"job-3", 2})->size(), 1u);
  EXPECT_EQ(store_->ListJobs("", {"job-1", 0})->size(), 4u) << "job-other is created after job-1";
  EXPECT_TRUE(store_->ListJobs("t1", {"job-missing", 2})->empty());
}

TEST_P(StoreTest, ActiveJobsAreThoseNotSettledInCreationOrder) {
  // One job per state, created in lifecycle order (CreateJob stores any state).
  for (JobState s : AllJobStates()) {
    JobRecord r =
        NewJob(std::string("job-") + JobStateName(s), "t1", 1000 + static_cast<TimeMs>(s));
    r.state = s;
    ASSERT_TRUE(store_->CreateJob(r, "s").ok());
  }
  auto active = store_->ListActiveJobs();
  ASSERT_TRUE(active.ok()) << active.status();
  std::vector<JobState> states;
  for (const JobRecord& r : *active) states.push_back(r.state);
  std::vector<JobState> expected;
  for (JobState s : AllJobStates()) {
    if (!IsSettled(s)) expected.push_back(s);
  }
  EXPECT_EQ(states, expected);
  // Counted per tenant: every job, and those not settled.
  ASSERT_TRUE(store_->CreateJob(NewJob("job-other", "t2"), "s").ok());
  auto counts = store_->CountJobs("t1");
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->total, static_cast<int64_t>(AllJobStates().size()));
  EXPECT_EQ(counts->active, static_cast<int64_t>(expected.size()));
  EXPECT_EQ(store_->CountJobs("t2")->total, 1);
  EXPECT_EQ(store_->CountJobs("t2")->active, 1);
  EXPECT_EQ(store_->CountJobs("nobody")->total, 0);
}

TEST_P(StoreTest, MetricsKeepOrderAndOptionalFields) {
  ASSERT_TRUE(store_->CreateJob(NewJob("job-a"), "s").ok());
  std::vector<MetricRecord> pts;
  for (int i = 1; i <= 5; ++i) {
    MetricRecord m;
    m.step = i * 10;
    m.epoch = 1;
    m.wall_time_ms = 1000 + i;
    m.train_loss = 1.0 / i;
    m.samples_per_s = 100 * i;
    if (i == 5) m.test_accuracy = 0.8;
    pts.push_back(m);
  }
  ASSERT_TRUE(store_->AppendMetrics("job-a", pts).ok());
  auto page = store_->MetricRange("job-a", 0, 100);
  ASSERT_TRUE(page.ok());
  const std::vector<MetricRecord>* all = &page->points;
  ASSERT_EQ(all->size(), 5u);
  EXPECT_EQ((*all)[0].step, 10);
  EXPECT_FALSE((*all)[0].test_accuracy.has_value());
  EXPECT_DOUBLE_EQ(*(*all)[4].test_accuracy, 0.8);
  auto last2_page = store_->MetricRange("job-a", -1, 2);
  const std::vector<MetricRecord>* last2 = &last2_page->points;
  ASSERT_EQ(last2->size(), 2u);
  EXPECT_EQ((*last2)[0].step, 40);
  EXPECT_EQ((*last2)[1].step, 50);
}

// A diverged job reports a NaN loss: its points are kept (SQLite cannot hold a NaN, so both
// stores keep a NaN loss or rate as +infinity, which JSON shows as null like a NaN, and a NaN
// test metric as none).
TEST_P(StoreTest, PointsWithANaNLossAreKept) {
  ASSERT_TRUE(store_->CreateJob(NewJob("job-a"), "s").ok());
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<MetricRecord> pts(3);
  pts[0] = {10, 1, 1000, 0.5, 100, 0.7, 0.4};
  pts[1] = {20, 1, 2000, nan, nan, nan, nan};
  pts[2] = {30, 1, 3000, -inf, inf, std::nullopt, inf};
  ASSERT_TRUE(store_->AppendMetrics("job-a", pts).ok());
  auto page = store_->MetricRange("job-a", 0, 10);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->points.size(), 3u);
  EXPECT_DOUBLE_EQ(page->points[0].train_loss, 0.5);
  EXPECT_EQ(page->points[1].train_loss, inf);
  EXPECT_EQ(page->points[1].samples_per_s, inf);
  EXPECT_FALSE(page->points[1].test_accuracy.has_value());
  EXPECT_FALSE(page->points[1].test_loss.has_value());
  EXPECT_EQ(page->points[2].train_loss, -inf);
  EXPECT_EQ(page->points[2].samples_per_s, inf);
  EXPECT_EQ(page->points[2].test_loss, inf);
}

TEST_P(StoreTest, MetricsArePagedByIndex) {
  ASSERT_TRUE(store_->CreateJob(NewJob("job-a"), "s").ok());
  std::vector<MetricRecord> pts(7);
  for (int i = 0; i < 7; ++i) pts[i].step = 10 * (i + 1);
  ASSERT_TRUE(store_->AppendMetrics("job-a", pts).ok());
  auto page = store_->MetricRange("job-a", 2, 3);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->total, 7);
  EXPECT_EQ(page->from, 2);
  ASSERT_EQ(page->points.size(), 3u);
  EXPECT_EQ(page->points[0].step, 30);
  EXPECT_EQ(page->points[2].step, 50);
  auto last = store_->MetricRange("job-a", -1, 3);  // the latest page
  EXPECT_EQ(last->from, 4);
  EXPECT_EQ(last->points.front().step, 50);
  EXPECT_EQ(last->points.back().step, 70);
  EXPECT_TRUE(store_->MetricRange("job-a", 7, 3)->points.empty());
  EXPECT_EQ(store_->MetricRange("job-a", -1, 100)->points.size(), 7u);
  EXPECT_TRUE(absl::IsNotFound(store_->MetricRange("job-nope", 0, 3).status()));
}

TEST_P(StoreTest, ModelsReplacePerKind) {
  ASSERT_TRUE(store_->CreateJob(NewJob("job-a"), "s").ok());
  ModelRecord a{"delivered", "/m1.pt", "/c1.json", 0.88, 2, 100, 1234, 5000};
  ASSERT_TRUE(store_->PutModel("job-a", a).ok());
  a.path = "/m2.pt";
  a.test_accuracy = 0.89;
  ASSERT_TRUE(store_->PutModel("job-a", a).ok());
  ModelRecord f{"final", "/f.pt", "/f.json", 0.91, 4, 200, 1234, 6000};
  ASSERT_TRUE(store_->PutModel("job-a", f).ok());
  auto arts = store_->Models("job-a");
  ASSERT_TRUE(arts.ok());
  ASSERT_EQ(arts->size(), 2u);
  EXPECT_EQ((*arts)[0].kind, "delivered");
  EXPECT_EQ((*arts)[0].path, "/m2.pt");
  EXPECT_EQ((*arts)[1].kind, "final");
  EXPECT_EQ((*arts)[1].bytes, 1234);
}

TEST_P(StoreTest, ASnapshotHoldsTheJobItsHistoryLatestMetricsAndModels) {
  ASSERT_TRUE(store_->CreateJob(NewJob("job-a"), "submitted").ok());
  ASSERT_TRUE(store_->CreateJob(NewJob("job-b"), "submitted").ok());
  std::vector<MetricRecord> pts(3);
  for (int i = 0; i < 3; ++i) pts[i].step = i + 1;
  ASSERT_TRUE(store_->AppendMetrics("job-a", pts).ok());
  ASSERT_TRUE(store_->AppendMetrics("job-b", pts).ok());
  ASSERT_TRUE(store_->PutModel("job-a", {"final", "/f.pt", "/f.json", 0.9, 1, 3, 10, 5}).ok());
  auto snap = store_->GetJobSnapshot("job-a", 2);
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ(snap->job.id, "job-a");
  ASSERT_EQ(snap->history.size(), 1u);
  EXPECT_EQ(snap->history[0].reason, "submitted");
  ASSERT_EQ(snap->metrics.size(), 2u);
  EXPECT_EQ(snap->metrics[0].step, 2);
  EXPECT_EQ(snap->metrics[1].step, 3);
  ASSERT_EQ(snap->models.size(), 1u);
  EXPECT_EQ(snap->models[0].path, "/f.pt");
  EXPECT_EQ(store_->GetJobSnapshot("job-b", 0)->metrics.size(), 3u);
  EXPECT_TRUE(store_->GetJobSnapshot("job-b", 0)->models.empty());
  EXPECT_TRUE(absl::IsNotFound(store_->GetJobSnapshot("job-nope", 2).status()));
}

TEST_P(StoreTest, CloseAndReopenKeepsEverything) {
  JobRecord r = NewJob("job-a");
  ASSERT_TRUE(store_->CreateJob(r, "submitted").ok());
  r.state = JobState::kPlaced;
  r.reason = "placed";
  r.updated_ms = 3000;
  ASSERT_TRUE(store_->TransitionJob(r, JobState::kQueued).ok());
  ASSERT_TRUE(store_->AppendMetrics("job-a", {MetricRecord{7, 1, 9, 0.5, 10, 0.7, 0.4}}).ok());
  ASSERT_TRUE(store_->PutModel("job-a", {"final", "/f.pt", "/f.json", 0.9, 1, 7, 10, 11}).ok());
  Reopen();
  auto got = store_->GetJob("job-a");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->state, JobState::kPlaced);
  EXPECT_EQ(store_->History("job-a")->size(), 2u);
  ASSERT_EQ(store_->MetricRange("job-a", 0, 100)->points.size(), 1u);
  EXPECT_DOUBLE_EQ(*store_->MetricRange("job-a", 0, 100)->points[0].test_accuracy, 0.7);
  EXPECT_EQ(store_->Models("job-a")->size(), 1u);
}

TEST_P(StoreTest, DeleteRemovesEverythingOfTheJob) {
  ASSERT_TRUE(store_->CreateJob(NewJob("job-a"), "s").ok());
  ASSERT_TRUE(store_->CreateJob(NewJob("job-b"), "s").ok());
  ASSERT_TRUE(store_->AppendMetrics("job-a", {MetricRecord{}}).ok());
  ASSERT_TRUE(store_->PutModel("job-a", {"final", "/f", "/c", 0, 0, 0, 0, 0}).ok());
  ASSERT_TRUE(store_->DeleteJob("job-a").ok());
  EXPECT_TRUE(absl::IsNotFound(store_->GetJob("job-a").status()));
  EXPECT_TRUE(absl::IsNotFound(store_->History("job-a").status()));
  // Re-creating the id starts from an empty history: nothing of the old job is left behind.
  ASSERT_TRUE(store_->CreateJob(NewJob("job-a"), "again").ok());
  EXPECT_EQ(store_->History("job-a")->size(), 1u);
  EXPECT_TRUE(store_->MetricRange("job-a", 0, 100)->points.empty());
  EXPECT_TRUE(store_->Models("job-a")->empty());
  EXPECT_TRUE(store_->GetJob("job-b").ok());
}

TEST_P(StoreTest, ATransitionQueuesADeliveryForEachWebhookThatAskedForItsState) {
  WebhookRecord mine{
      "hook-1",     "t1", "http://127.0.0.1:9/a", {"DELIVERED", "COMPLETED"}, "s1", 100, "",
      std::nullopt, 0};
  WebhookRecord all_states = mine;
  all_states.id = "hook-2";
  all_states.events = {"QUEUED", "PLACED", "DELIVERED"};
  WebhookRecord theirs = mine;
  theirs.id = "hook-3";
  theirs.tenant = "t2";
  for (const WebhookRecord& w : {mine, all_states, theirs}) {
    ASSERT_TRUE(store_->CreateWebhook(w, 16).ok());
  }
  EXPECT_TRUE(absl::IsAlreadyExists(store_->CreateWebhook(mine, 16)));
  // At the tenant's cap, counted with the insert: refused, saying why; another tenant is not.
  WebhookRecord one_more = mine;
  one_more.id = "hook-4";
  absl::Status capped = store_->CreateWebhook(one_more, 2);
  EXPECT_TRUE(absl::IsFailedPrecondition(capped)) << capped;
  EXPECT_EQ(capped.message(),
            "tenant 't1' has 2 webhooks, as many as weftd allows; delete one first");
  one_more.tenant = "t2";
  EXPECT_TRUE(store_->CreateWebhook(one_more, 2).ok());
  JobRecord r = NewJob("job-a", "t1");
  ASSERT_TRUE(store_->CreateJob(r, "submitted").ok());  // QUEUED: hook-2
  r.state = JobState::kPlaced;
  r.updated_ms = 200;
  ASSERT_TRUE(store_->TransitionJob(r, JobState::kQueued).ok());  // hook-2
  r.state = JobState::kFailed;
  r.updated_ms = 300;
  r.reason = "broke";
  ASSERT_TRUE(store_->TransitionJob(r, JobState::kPlaced).ok());  // nobody
  // A refused transition queues nothing.
  EXPECT_FALSE(store_->TransitionJob(r, JobState::kRunning).ok());

  auto due = store_->DueDeliveries(/*now_ms=*/1000, 10);
  ASSERT_TRUE(due.ok()) << due.status();
  ASSERT_EQ(due->size(), 2u);
  EXPECT_EQ((*due)[0].webhook_id, "hook-2");
  EXPECT_EQ((*due)[0].event, "QUEUED");
  EXPECT_FALSE((*due)[0].from.has_value());
  EXPECT_EQ((*due)[1].event, "PLACED");
  EXPECT_EQ((*due)[1].from, "QUEUED");
  EXPECT_EQ((*due)[1].time_ms, 200);
  EXPECT_EQ((*due)[1].url, "http://127.0.0.1:9/a");
  EXPECT_EQ((*due)[1].secret, "s1");
  EXPECT_EQ((*due)[1].job, "job-a");
  EXPECT_LT((*due)[0].id, (*due)[1].id);
  EXPECT_TRUE(store_->DueDeliveries(/*now_ms=*/50, 10)->empty()) << "not due before its event";

  // Delivered, retried later, given up: only the retry is due again, when its time comes; the
  // webhook shows the latest outcome. The outbox survives a reopen.
  const int64_t first = (*due)[0].id, second = (*due)[1].id;
  ASSERT_TRUE(store_->RecordDeliveryAttempt(first, 1000, "200", true, std::nullopt).ok());
  ASSERT_TRUE(store_->RecordDeliveryAttempt(second, 1001, "503", false, 5000).ok());
  Reopen();
  EXPECT_TRUE(store_->DueDeliveries(4999, 10)->empty());
  due = store_->DueDeliveries(5000, 10);
  ASSERT_EQ(due->size(), 1u);
  EXPECT_EQ((*due)[0].attempts, 1);
  auto hooks = store_->ListWebhooks("t1");
  ASSERT_EQ(hooks->size(), 2u);
  EXPECT_EQ((*hooks)[1].id, "hook-2");
  EXPECT_EQ((*hooks)[1].last_status, "503");
  EXPECT_EQ((*hooks)[1].last_attempt_ms, 1001);
  EXPECT_EQ((*hooks)[1].pending, 1);
  EXPECT_EQ((*hooks)[1].events, (std::vector<std::string>{"QUEUED", "PLACED", "DELIVERED"}));
  ASSERT_TRUE(store_->RecordDeliveryAttempt(second, 5000, "gave up", false, std::nullopt).ok());
  EXPECT_TRUE(store_->DueDeliveries(1'000'000, 10)->empty());

  // Another tenant's webhook is not found; deleting one takes what it was owed with it.
  EXPECT_TRUE(absl::IsNotFound(store_->DeleteWebhook("t1", "hook-3")));
  ASSERT_TRUE(store_->DeleteWebhook("t1", "hook-2").ok());
  EXPECT_EQ(store_->ListWebhooks("t1")->size(), 1u);
  EXPECT_TRUE(store_->RecordDeliveryAttempt(second, 6000, "200", true, std::nullopt).ok());
}

TEST_P(StoreTest, CheckpointsNewestFirstAndSurviveReopen) {
  ASSERT_TRUE(store_->CreateJob(NewJob("job-a"), "s").ok());
  ASSERT_TRUE(store_->PutCheckpoint("job-a", {100, 1, "/c100", 10, 1, 0}).ok());
  ASSERT_TRUE(store_->PutCheckpoint("job-a", {300, 2, "/c300", 10, 3, 0}).ok());
  ASSERT_TRUE(store_->PutCheckpoint("job-a", {200, 1, "/c200", 10, 2, 0}).ok());
  Reopen();
  auto c = store_->Checkpoints("job-a");
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->size(), 3u);
  EXPECT_EQ((*c)[0].step, 300);
  EXPECT_EQ((*c)[0].path, "/c300");
  EXPECT_EQ((*c)[2].step, 100);
  ASSERT_TRUE(store_->DeleteCheckpoint("job-a", 100).ok());
  EXPECT_EQ(store_->Checkpoints("job-a")->size(), 2u);
  EXPECT_TRUE(store_->DeleteCheckpoint("job-a", 999).ok());
  EXPECT_TRUE(absl::IsNotFound(store_->PutCheckpoint("nope", {1, 0, "/x", 1, 1, 0})));
  ASSERT_TRUE(store_->DeleteJob("job-a").ok());
  ASSERT_TRUE(store_->CreateJob(NewJob("job-a"), "again").ok());
  EXPECT_TRUE(store_->Checkpoints("job-a")->empty());
}

TEST_P(StoreTest, RestartCountIsKept) {
  JobRecord r = NewJob("job-a");
  ASSERT_TRUE(store_->CreateJob(r, "s").ok());
  r.restarts = 2;
  ASSERT_TRUE(store_->UpdateJob(r).ok());
  Reopen();
  EXPECT_EQ(store_->GetJob("job-a")->restarts, 2);
}

TEST_P(StoreTest, ArtifactsAreNamedPerTenantAndCountWhoSharesTheirContent) {
  TenantRecord t;
  t.name = "vision";
  ASSERT_TRUE(store_->CreateTenant(t).ok());
  ASSERT_TRUE(store_->PutArtifact({"vision", "cnn.pt", "aa", 10, 1}).ok());
  ASSERT_TRUE(store_->PutArtifact({"vision", "copy.pt", "aa", 10, 2}).ok());
  ASSERT_TRUE(store_->PutArtifact({"vision", "data.csv", "bb", 7, 3}).ok());
  ASSERT_TRUE(store_->PutArtifact({"nlp", "cnn.pt", "cc", 5, 4}).ok());
  Reopen();
  auto got = store_->GetArtifact("vision", "cnn.pt");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->sha256, "aa");
  EXPECT_EQ(got->bytes, 10);
  EXPECT_EQ(got->created_ms, 1);
  EXPECT_EQ(store_->GetArtifact("nlp", "cnn.pt")->sha256, "cc");
  EXPECT_TRUE(absl::IsNotFound(store_->GetArtifact("nlp", "data.csv").status()));
  auto list = store_->ListArtifacts("vision");
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[0].name, "cnn.pt");
  EXPECT_EQ((*list)[2].name, "data.csv");
  // A name replaced points at the new content.
  ASSERT_TRUE(store_->PutArtifact({"vision", "data.csv", "dd", 8, 5}).ok());
  EXPECT_EQ(store_->GetArtifact("vision", "data.csv")->sha256, "dd");
  EXPECT_EQ(store_->ListArtifacts("vision")->size(), 3u);
  // Deleting counts the names left on the same content, in that tenant only.
  EXPECT_EQ(*store_->DeleteArtifact("vision", "cnn.pt"), 1);
  EXPECT_EQ(*store_->DeleteArtifact("vision", "copy.pt"), 0);
  EXPECT_TRUE(absl::IsNotFound(store_->DeleteArtifact("vision", "copy.pt").status()));
  EXPECT_TRUE(absl::IsNotFound(store_->DeleteArtifact("vision", "ghost").status()));
  // They go with their tenant.
  ASSERT_TRUE(store_->DeleteTenant("vision").ok());
  EXPECT_TRUE(store_->ListArtifacts("vision")->empty());
  EXPECT_EQ(store_->ListArtifacts("nlp")->size(), 1u);
}

TEST_P(StoreTest, DataSetsRoundTripAndForgetADeletedTenant) {
  for (const char* name : {"vision", "nlp"}) {
    TenantRecord t;
    t.name = name;
    ASSERT_TRUE(store_->CreateTenant(t).ok());
  }
  ASSERT_TRUE(store_->PutDataset({"fmnist", "/srv/fmnist", "idx", true, {}, 1}).ok());
  ASSERT_TRUE(store_->PutDataset({"scans", "/srv/scans", "idx", false, {"vision", "nlp"}, 2}).ok());
  Reopen();
  auto all = store_->ListDatasets();
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].name, "fmnist");
  EXPECT_TRUE((*all)[0].all_tenants);
  EXPECT_TRUE((*all)[0].UsableBy("anyone"));
  auto scans = store_->GetDataset("scans");
  ASSERT_TRUE(scans.ok());
  EXPECT_EQ(scans->path, "/srv/scans");
  EXPECT_EQ(scans->format, "idx");
  EXPECT_FALSE(scans->all_tenants);
  EXPECT_EQ(scans->tenants, (std::vector<std::string>{"vision", "nlp"}));
  EXPECT_EQ(scans->created_ms, 2);
  EXPECT_TRUE(scans->UsableBy("nlp"));
  EXPECT_FALSE(scans->UsableBy("other"));
  // A deleted tenant's name leaves the lists: a new tenant of that name inherits nothing.
  ASSERT_TRUE(store_->DeleteTenant("vision").ok());
  EXPECT_EQ(store_->GetDataset("scans")->tenants, (std::vector<std::string>{"nlp"}));
  ASSERT_TRUE(store_->DeleteTenant("nlp").ok());
  EXPECT_TRUE(store_->GetDataset("scans")->tenants.empty());
  EXPECT_FALSE(store_->GetDataset("scans")->UsableBy("nlp"));
  ASSERT_TRUE(store_->DeleteDataset("scans").ok());
  EXPECT_TRUE(absl::IsNotFound(store_->GetDataset("scans").status()));
  EXPECT_TRUE(absl::IsNotFound(store_->DeleteDataset("scans")));
  EXPECT_EQ(store_->ListDatasets()->size(), 1u);
}

TEST_P(StoreTest, ImagesAreTheAdminsOrATenantsOwnAndGoWithTheirTenant) {
  for (const char* name : {"vision", "nlp"}) {
    TenantRecord t;
    t.name = name;
    ASSERT_TRUE(store_->CreateTenant(t).ok());
  }
  ImageRecord shared{"",  "py311", "localhost/weft/_/py311:aa", "aa", "rootfs",
                     100, false,   {"vision", "nlp"},           1};
  ImageRecord own{"vision", "env", "localhost/weft/vision/env:bb", "bb", "oci-archive", 200, false,
                  {},       2};
  ImageRecord same_name{
      "nlp", "env", "localhost/weft/nlp/env:cc", "cc", "docker-archive", 300, false, {}, 3};
  for (const ImageRecord& i : {shared, own, same_name}) ASSERT_TRUE(store_->PutImage(i).ok());
  Reopen();
  auto all = store_->ListImages();
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].tenant, "") << "the admin's first";
  auto mine = store_->GetImage("vision", "env");
  ASSERT_TRUE(mine.ok()) << mine.status();
  EXPECT_EQ(mine->reference, "localhost/weft/vision/env:bb");
  EXPECT_EQ(mine->digest, "bb");
  EXPECT_EQ(mine->format, "oci-archive");
  EXPECT_EQ(mine->bytes, 200);
  EXPECT_EQ(mine->created_ms, 2);
  EXPECT_TRUE(mine->UsableBy("vision"));
  EXPECT_FALSE(mine->UsableBy("nlp")) << "another tenant's image";
  EXPECT_EQ(store_->GetImage("nlp", "env")->reference, "localhost/weft/nlp/env:cc");
  EXPECT_TRUE(absl::IsNotFound(store_->GetImage("other", "env").status()));
  EXPECT_TRUE(store_->GetImage("", "py311")->UsableBy("nlp"));
  // A deleted tenant's own images go, and its name leaves the admin's grants.
  ASSERT_TRUE(store_->DeleteTenant("vision").ok());
  EXPECT_TRUE(absl::IsNotFound(store_->GetImage("vision", "env").status()));
  EXPECT_EQ(store_->GetImage("", "py311")->tenants, (std::vector<std::string>{"nlp"}));
  ASSERT_TRUE(store_->DeleteImage("nlp", "env").ok());
  EXPECT_TRUE(absl::IsNotFound(store_->DeleteImage("nlp", "env")));
  EXPECT_EQ(store_->ListImages()->size(), 1u);
}

TEST_P(StoreTest, TenantsRoundTripUpdateAndDeleteOnlyWithoutJobs) {
  TenantRecord t;
  t.name = "vision";
  t.has_quota = true;
  t.quota_cpus = 4;
  t.quota_memory_mb = 8192;
  t.quota_gpus = 1;
  t.weight = 2;
  t.created_ms = 5;
  ASSERT_TRUE(store_->CreateTenant(t).ok());
  EXPECT_TRUE(absl::IsAlreadyExists(store_->CreateTenant(t)));
  Reopen();
  auto got = store_->GetTenant("vision");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(got->has_quota);
  EXPECT_EQ(got->quota_cpus, 4);
  EXPECT_EQ(got->quota_memory_mb, 8192);
  EXPECT_EQ(got->quota_gpus, 1);
  EXPECT_EQ(got->weight, 2);
  EXPECT_FALSE(got->disk_quota_mb.has_value()) << "none set: weftd's default";
  t.weight = 3;
  t.has_quota = false;
  t.disk_quota_mb = 512;
  ASSERT_TRUE(store_->UpdateTenant(t).ok());
  EXPECT_EQ(store_->GetTenant("vision")->weight, 3);
  EXPECT_FALSE(store_->GetTenant("vision")->has_quota);
  EXPECT_EQ(store_->GetTenant("vision")->disk_quota_mb, std::optional<int64_t>(512));
  t.disk_quota_mb.reset();
  ASSERT_TRUE(store_->UpdateTenant(t).ok());
  EXPECT_FALSE(store_->GetTenant("vision")->disk_quota_mb.has_value());
  EXPECT_TRUE(absl::IsNotFound(store_->GetTenant("nlp").status()));

  JobRecord j = NewJob("job-v");
  j.tenant = "vision";
  ASSERT_TRUE(store_->CreateJob(j, "submitted").ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(store_->DeleteTenant("vision")));
  ASSERT_TRUE(store_->DeleteJob("job-v").ok());
  TokenRecord tok{"tok-1", "vision", "abc", 1, std::nullopt};
  ASSERT_TRUE(store_->CreateToken(tok).ok());
  ASSERT_TRUE(store_->FindToken("abc").ok());  // found once (a store may keep it in memory)
  ASSERT_TRUE(store_->DeleteTenant("vision").ok());
  EXPECT_TRUE(absl::IsNotFound(store_->GetTenant("vision").status()));
  EXPECT_TRUE(absl::IsNotFound(store_->FindToken("abc").status()));  // tokens go with it
  EXPECT_TRUE(absl::IsNotFound(store_->DeleteTenant("vision")));
}

TEST_P(StoreTest, TokensAreFoundByDigestAndRevokedByTheirTenantOnly) {
  ASSERT_TRUE(store_->CreateToken({"tok-a", "a", "digest-a", 1, std::nullopt}).ok());
  ASSERT_TRUE(store_->CreateToken({"tok-admin", "", "digest-admin", 2, std::nullopt}).ok());
  EXPECT_TRUE(
      absl::IsAlreadyExists(store_->CreateToken({"tok-b", "b", "digest-a", 3, std::nullopt})));
  auto a = store_->FindToken("digest-a");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->tenant, "a");
  EXPECT_FALSE(a->revoked_ms.has_value());
  EXPECT_TRUE(absl::IsNotFound(store_->RevokeToken("b", "tok-a", 9)));  // not b's token
  ASSERT_TRUE(store_->RevokeToken("a", "tok-a", 9).ok());  // after FindToken: seen at once
  Reopen();
  EXPECT_EQ(store_->FindToken("digest-a")->revoked_ms, 9);
  EXPECT_EQ(store_->FindToken("digest-admin")->tenant, "");
  EXPECT_EQ(store_->ListTokens("a")->size(), 1u);
  EXPECT_EQ(store_->ListTokens("")->size(), 1u);
}

}  // namespace weft
