// The PostgreSQL store: the shared store suite on a throwaway cluster (store/pg_cluster.h), and
// what only this store has (a server that goes away and comes back, a schema from the future).
#include "store/pg_store.h"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

#include "store/pg_cluster.h"
#include "store/pg_database.h"
#include "store/pg_leadership.h"
#include "store/schema.h"
#include "store/store_tests.h"

namespace weft {
namespace {

using testing::PgCluster;

// One database per test directory, so each test starts empty and Reopen finds what it left.
std::string UriFor(const std::string& dir) {
  std::string why;
  PgCluster* cluster = PgCluster::Shared(&why);
  if (cluster == nullptr) {
    [&] { GTEST_SKIP() << "no PostgreSQL here: " << why; }();
    return "";
  }
  std::string name = std::filesystem::path(dir).filename().string();
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  const std::string uri = cluster->Database(name);
  if (uri.empty()) ADD_FAILURE() << "cannot create database " << name;
  return uri;
}

std::unique_ptr<Store> MakePgStore(const std::string& dir) {
  const std::string uri = UriFor(dir);
  if (uri.empty()) return nullptr;
  auto s = PgStore::Open(uri);
  if (!s.ok()) {
    ADD_FAILURE() << s.status();
    return nullptr;
  }
  return std::move(*s);
}

INSTANTIATE_TEST_SUITE_P(Postgresql, StoreTest, ::testing::Values(&MakePgStore));

class PgStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    cluster_ = PgCluster::Shared(&why);
    if (cluster_ == nullptr) GTEST_SKIP() << "no PostgreSQL here: " << why;
  }
  PgCluster* cluster_ = nullptr;
};

TEST_F(PgStoreTest, AnUnreachableServerIsUnavailableAndNamesNoPassword) {
  auto s = PgStore::Open("postgresql://weft:hunter2@/nope?host=/nonexistent-dir&port=5999");
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::IsUnavailable(s.status())) << s.status();
  EXPECT_EQ(s.status().message().find("hunter2"), std::string_view::npos) << s.status();
}

TEST_F(PgStoreTest, ASchemaNewerThanThisWeftdIsRefused) {
  const std::string uri = cluster_->Database("future_schema");
  ASSERT_FALSE(uri.empty());
  {
    auto s = PgStore::Open(uri);
    ASSERT_TRUE(s.ok()) << s.status();
  }
  ASSERT_TRUE(cluster_->Sql("future_schema", "UPDATE weft_schema SET version = 99"));
  auto s = PgStore::Open(uri);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(s.status())) << s.status();
  EXPECT_NE(s.status().message().find("newer than this weftd"), std::string_view::npos);
}

// A database a weftd of PostgreSQL schema version 2 left (before generations and images) opens
// as the latest version with its jobs intact: the single schema source keeps PostgreSQL's own
// upgrade path.
TEST_F(PgStoreTest, VersionTwoMigratesToTheLatestWithItsJobs) {
  const std::string uri = cluster_->Database("schema_v2");
  ASSERT_FALSE(uri.empty());
  const std::string v2 = schema::Migration(schema::Dialect::kPostgres, 1) +
                         schema::Migration(schema::Dialect::kPostgres, 2) +
                         "CREATE TABLE weft_schema (version BIGINT NOT NULL);"
                         "INSERT INTO weft_schema VALUES (2);"
                         "INSERT INTO jobs (id, tenant, name, state, reason, manifest, spec_json, "
                         "created_ms, updated_ms, attempt, node, learner_pid, epoch, epochs_total, "
                         "step, steps_total, samples) VALUES ('job-old', 't', 'n', 'COMPLETED', "
                         "'r', 'm', '{}', 1, 2, 1, 'local', 0, 1, 1, 10, 10, 100);";
  ASSERT_TRUE(cluster_->Sql("schema_v2", v2));
  auto store = PgStore::Open(uri);
  ASSERT_TRUE(store.ok()) << store.status();
  auto job = (*store)->GetJob("job-old");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->progress.samples, 100);
  EXPECT_EQ(job->generation, 0) << "version 3's column, at its default";
  EXPECT_TRUE((*store)->ListImages()->empty()) << "version 4's table, empty";
  EXPECT_EQ(job->trial, -1) << "version 5's column: not a trial";
  EXPECT_TRUE(static_cast<Store&>(**store).ListExperiments()->empty())
      << "version 5's table, empty";
}

// The server restarts under an open store: the call that finds the connection broken fails with
// Unavailable, the next one connects again, and nothing acknowledged is lost.
TEST_F(PgStoreTest, AfterTheServerRestartsTheStoreConnectsAgainAndLosesNothing) {
  const std::string uri = cluster_->Database("server_restart");
  ASSERT_FALSE(uri.empty());
  auto store = PgStore::Open(uri);
  ASSERT_TRUE(store.ok()) << store.status();
  JobRecord job;
  job.id = "job-before";
  job.tenant = "t";
  ASSERT_TRUE((*store)->CreateJob(job, "submitted").ok());
  ASSERT_TRUE(cluster_->StopServer());
  absl::Status down = (*store)->GetJob("job-before").status();
  EXPECT_TRUE(absl::IsUnavailable(down)) << down;
  ASSERT_TRUE(cluster_->StartServer());
  absl::StatusOr<JobRecord> back = (*store)->GetJob("job-before");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->tenant, "t");
  job.id = "job-after";
  EXPECT_TRUE((*store)->CreateJob(job, "submitted").ok());
  EXPECT_EQ(static_cast<Store&>(**store).ListJobs("t")->size(), 2u);
}

// Calls run concurrently on the pool's connections, and each stays one atomic call: of 8
// threads racing to move a job out of QUEUED exactly one wins, and its history has no gap;
// metrics appended from every thread are all there.
TEST_F(PgStoreTest, ConcurrentCallsOnThePoolStayAtomic) {
  const std::string uri = cluster_->Database("concurrent");
  ASSERT_FALSE(uri.empty());
  auto store = PgStore::Open(uri);
  ASSERT_TRUE(store.ok()) << store.status();
  constexpr int kJobs = 20, kThreads = 8;
  for (int j = 0; j < kJobs; ++j) {
    JobRecord job;
    job.id = "job-" + std::to_string(j);
    job.tenant = "t";
    ASSERT_TRUE((*store)->CreateJob(job, "submitted").ok());
  }
  std::atomic<int> won{0}, lost{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int j = 0; j < kJobs; ++j) {
        JobRecord job;
        job.id = "job-" + std::to_string(j);
        job.tenant = "t";
        job.state = JobState::kPlaced;
        job.reason = "placed by thread " + std::to_string(t);
        absl::Status s = (*store)->TransitionJob(job, JobState::kQueued);
        (s.ok() ? won : lost)++;
        if (!s.ok()) {
          EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
        }
        MetricRecord point;
        point.step = t;
        EXPECT_TRUE((*store)->AppendMetrics(job.id, {point}).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(won.load(), kJobs);
  EXPECT_EQ(lost.load(), kJobs * (kThreads - 1));
  for (int j = 0; j < kJobs; ++j) {
    auto history = (*store)->History("job-" + std::to_string(j));
    ASSERT_TRUE(history.ok());
    ASSERT_EQ(history->size(), 2u);
    EXPECT_EQ((*history)[1].seq, 2);
    EXPECT_EQ((*store)->MetricRange("job-" + std::to_string(j), 0, 100)->total, kThreads);
  }
}

// Text PostgreSQL cannot hold (invalid UTF-8, NUL) is stored as U+FFFD instead of failing the
// write: a learner's report must never make a transition fail.
TEST_F(PgStoreTest, TextThatIsNotUtf8IsStoredWithReplacementCharacters) {
  const std::string uri = cluster_->Database("not_utf8");
  ASSERT_FALSE(uri.empty());
  auto store = PgStore::Open(uri);
  ASSERT_TRUE(store.ok()) << store.status();
  JobRecord job;
  job.id = "job-a";
  job.tenant = "t";
  ASSERT_TRUE((*store)->CreateJob(job, "submitted").ok());
  job.state = JobState::kFailed;
  job.reason = std::string("learner said \xff\xfe and ") + std::string(1, '\0') + "bye";
  ASSERT_TRUE((*store)->TransitionJob(job, JobState::kQueued).ok());
  auto got = (*store)->GetJob("job-a");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->reason,
            "learner said \xef\xbf\xbd\xef\xbf\xbd and \xef\xbf\xbd"
            "bye");
  EXPECT_TRUE(absl::IsNotFound((*store)->GetJob("job-\xff").status()));
}

// Two weftd campaign for one lease: the first takes epoch 1, the second stands by and is told who
// leads; renewals keep the epoch; once the lease runs out the second takes it at epoch 2, and the
// first's next renewal learns it was deposed.
TEST_F(PgStoreTest, OneMemberHoldsTheLeaseAndATakeoverRaisesTheEpoch) {
  const std::string uri = cluster_->Database("lease");
  ASSERT_FALSE(uri.empty());
  auto a = PgStore::Open(uri);
  auto b = PgStore::Open(uri);
  ASSERT_TRUE(a.ok() && b.ok());
  const Member ma{"a", "http://127.0.0.1:1", "127.0.0.1:2"}, mb{"b", "http://127.0.0.1:3", "x:4"};
  constexpr int64_t kTtlMs = 400;
  auto la = (*a)->leadership().Campaign(ma, 0, kTtlMs);
  ASSERT_TRUE(la.ok()) << la.status();
  EXPECT_TRUE(la->held);
  EXPECT_EQ(la->epoch, 1);
  auto lb = (*b)->leadership().Campaign(mb, 0, kTtlMs);
  ASSERT_TRUE(lb.ok()) << lb.status();
  EXPECT_FALSE(lb->held);
  EXPECT_EQ(lb->leader.name, "a");
  EXPECT_EQ(lb->leader.coordinator, "127.0.0.1:2");
  EXPECT_GT(lb->expires_in_ms, 0);
  ASSERT_EQ(lb->members.size(), 2u);
  EXPECT_EQ(lb->members[1].api, "http://127.0.0.1:3");
  la = (*a)->leadership().Campaign(ma, 1, kTtlMs);
  ASSERT_TRUE(la.ok());
  EXPECT_TRUE(la->held);
  EXPECT_EQ(la->epoch, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(kTtlMs + 100));
  lb = (*b)->leadership().Campaign(mb, 0, kTtlMs);
  ASSERT_TRUE(lb.ok());
  EXPECT_TRUE(lb->held);
  EXPECT_EQ(lb->epoch, 2);
  EXPECT_EQ(lb->last_holder.coordinator, "127.0.0.1:2") << "the expired leader, for its learners";
  la = (*a)->leadership().Campaign(ma, 1, kTtlMs);
  ASSERT_TRUE(la.ok());
  EXPECT_FALSE(la->held);
  EXPECT_EQ(la->leader.name, "b");
  EXPECT_EQ(la->epoch, 2);
  // A weftd restarted under its name (held epoch 0) takes its own lease at once.
  lb = (*b)->leadership().Campaign(mb, 0, 60'000);
  ASSERT_TRUE(lb.ok());
  EXPECT_TRUE(lb->held);
  EXPECT_EQ(lb->epoch, 3);
}

// Once fenced at its epoch, a deposed leader's writes are refused with nothing written, and it
// hears so at once; the new leader's history entries carry the new epoch.
TEST_F(PgStoreTest, AFencedStoreRefusesWritesAfterATakeover) {
  const std::string uri = cluster_->Database("fence");
  ASSERT_FALSE(uri.empty());
  auto a = PgStore::Open(uri);
  auto b = PgStore::Open(uri);
  ASSERT_TRUE(a.ok() && b.ok());
  auto la = (*a)->leadership().Campaign({"a", "", ""}, 0, 100);
  ASSERT_TRUE(la.ok() && la->held);
  std::atomic<int64_t> deposed_at{0};
  (*a)->leadership().Fence(la->epoch, 100, [&](int64_t epoch) { deposed_at = epoch; });
  JobRecord job;
  job.id = "job-before";
  job.tenant = "t";
  ASSERT_TRUE((*a)->CreateJob(job, "submitted").ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto lb = (*b)->leadership().Campaign({"b", "", ""}, 0, 60'000);
  ASSERT_TRUE(lb.ok() && lb->held);
  (*b)->leadership().Fence(lb->epoch, 60'000, [](int64_t) { ADD_FAILURE() << "b deposed"; });

  job.id = "job-after";
  absl::Status s = (*a)->CreateJob(job, "submitted");
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_EQ(deposed_at.load(), 2);
  EXPECT_TRUE(absl::IsNotFound((*b)->GetJob("job-after").status()));
  job.id = "job-before";
  job.state = JobState::kPlaced;
  EXPECT_TRUE(absl::IsFailedPrecondition((*a)->TransitionJob(job, JobState::kQueued)));
  EXPECT_TRUE((*b)->TransitionJob(job, JobState::kQueued).ok());
  // Reads stay open to the deposed one (a standby reads too).
  EXPECT_TRUE((*a)->GetJob("job-before").ok());
  EXPECT_TRUE(cluster_->Sql("fence", R"sql(
    DO $$ BEGIN
      IF (SELECT string_agg(seq || ':' || leader_epoch, ',' ORDER BY seq) FROM job_events
          WHERE job_id = 'job-before') IS DISTINCT FROM '1:1,2:2' THEN
        RAISE EXCEPTION 'history not stamped with the writers'' epochs';
      END IF;
    END $$)sql"));
}

// A leader stopped in the middle of a write (SIGSTOP, a VM paused) holds the lease row's share
// lock; once it has stalled for longer than its lease the server ends its session, so the
// standby's campaign takes the lease instead of waiting for the stalled one to wake, and the
// stalled write fails, having written nothing.
TEST_F(PgStoreTest, AWriterStalledPastItsLeaseCannotHoldUpTheTakeover) {
  const std::string uri = cluster_->Database("stall");
  ASSERT_FALSE(uri.empty());
  auto a_db = PgDatabase::Open(uri);
  auto b_db = PgDatabase::Open(uri);
  ASSERT_TRUE(a_db.ok() && b_db.ok());
  std::shared_ptr<PgDatabase> stalled_db = std::move(*a_db);
  PgLeadership a(stalled_db);
  PgLeadership b(std::shared_ptr<PgDatabase>(std::move(*b_db)));
  auto la = a.Campaign({"a", "", ""}, 0, 300);
  ASSERT_TRUE(la.ok() && la->held);
  a.Fence(la->epoch, 300, [](int64_t) {});

  absl::Mutex mu;
  bool b_leads = false;  // guarded by mu
  std::atomic<bool> write_returned{false};
  absl::Status write;
  std::thread writer([&] {
    write = stalled_db->Transact("a stalled write", sql::Mode::kWrite, [&](sql::Tx& tx) {
      // Past the fence check (the share lock is held); now the process stalls until b leads.
      absl::MutexLock lock(&mu);
      mu.AwaitWithTimeout(absl::Condition(&b_leads), absl::Seconds(30));
      return tx
          .Execute("write after the stall",
                   "INSERT INTO tenants (name, has_quota, quota_cpus, quota_memory_mb, "
                   "quota_gpus, weight, created_ms) VALUES ('stalled', false, 0, 0, 0, 1, 0)")
          .status();
    });
    write_returned = true;
  });
  absl::StatusOr<Lease> lb;
  for (int i = 0; i < 100; ++i) {  // until a's lease runs out (300 ms)
    lb = b.Campaign({"b", "", ""}, 0, 60'000);
    if (!lb.ok() || lb->held) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_FALSE(write_returned.load()) << "b's campaign waited for the stalled write to end";
  {
    absl::MutexLock lock(&mu);
    b_leads = true;
  }
  writer.join();
  ASSERT_TRUE(lb.ok()) << lb.status();
  EXPECT_TRUE(lb->held);
  EXPECT_EQ(lb->epoch, 2);
  EXPECT_FALSE(write.ok()) << "the server ended the stalled session";
  EXPECT_TRUE(cluster_->Sql("stall", R"sql(
    DO $$ BEGIN
      IF EXISTS (SELECT 1 FROM tenants WHERE name = 'stalled') THEN
        RAISE EXCEPTION 'the stalled write was committed';
      END IF;
    END $$)sql"));
}

}  // namespace
}  // namespace weft
