// weftd on a PostgreSQL store (weftd --store postgresql://…), through the real binaries and a
// throwaway PostgreSQL cluster (store/pg_cluster.h): a job trains to completion, weftd killed
// mid-training adopts its learner from what PostgreSQL holds, and no SQLite file is made.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "integration/weftd_test.h"
#include "nlohmann/json.hpp"
#include "store/pg_cluster.h"
#include "store/pg_store.h"

namespace weft {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using testing::WeftdProcess;

class PostgresqlTest : public testing::WeftdTest {
 protected:
  testing::WeftdTestOptions Options() const override {
    testing::WeftdTestOptions o("pg-e2e");
    o.fashion_mnist = true;
    o.postgresql = true;
    return o;
  }
};

TEST_F(PostgresqlTest, AJobCompletesAndAKilledWeftdAdoptsItsLearnerFromPostgresql) {
  const std::string file = dir_ + "/pg.yaml";
  std::ofstream(file) << "name: pg\nmodel: {architecture: mlp, hidden_units: [128]}\n"
                         "data: {train_samples: 12000, test_samples: 2000}\n"
                         "training: {epochs: 8, threads: 1}\nresources: {cpus: 1}\n"
                         "targets: {deliver: 0.7}\n";
  auto submit = weftd_->Cli({"submit", file});
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  const std::string id = testing::SubmittedJobId(submit.output);
  ASSERT_EQ(weftd_->WaitForJob(id, {"RUNNING"}, 60)["state"], "RUNNING");
  weftd_->Kill();
  std::this_thread::sleep_for(std::chrono::seconds(2));  // the learner trains on, alone
  ASSERT_TRUE(weftd_->Start()) << weftd_->log();
  json done = weftd_->WaitForJob(id, {"COMPLETED", "FAILED"}, 240);
  ASSERT_EQ(done["state"], "COMPLETED") << done.dump(2) << weftd_->log();
  EXPECT_EQ(done["attempt"], 1) << "adopted, never restarted: " << done["history"].dump(2)
                                << weftd_->log();
  EXPECT_THAT(weftd_->log(), HasSubstr("adopted learner"));
  EXPECT_THAT(weftd_->log(), HasSubstr("store postgresql weft@"));
  // Restarted on another port (another default --name), it serves the learner at the
  // coordinator address the learner knows, the dead leader's.
  EXPECT_THAT(weftd_->log(), HasSubstr("the previous leader's coordinator address"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/data/weft.db")) << "no SQLite store is made";

  // What weftd acknowledged is in PostgreSQL, read without weftd.
  auto store = PgStore::Open(store_uri_);
  ASSERT_TRUE(store.ok()) << store.status();
  auto history = (*store)->History(id);
  ASSERT_TRUE(history.ok()) << history.status();
  EXPECT_EQ(history->back().to, JobState::kCompleted);
  auto models = (*store)->Models(id);
  ASSERT_TRUE(models.ok()) << models.status();
  std::vector<std::string> kinds;
  for (const ModelRecord& m : *models) kinds.push_back(m.kind);
  EXPECT_THAT(kinds, ::testing::UnorderedElementsAre("delivered", "final"));
  auto metrics = (*store)->MetricRange(id, 0, 0);
  ASSERT_TRUE(metrics.ok());
  EXPECT_GT(metrics->total, 8);
}

// The database server goes away for a few seconds mid-training: requests meanwhile get 503,
// weftd stays up, the learner trains on, and once the server is back the job completes with
// every epoch's metrics.
TEST_F(PostgresqlTest, WhileTheDatabaseIsDownRequestsGet503AndTheJobCompletesOnceItIsBack) {
  const std::string file = dir_ + "/pg.yaml";
  std::ofstream(file) << "name: pg\nmodel: {architecture: mlp, hidden_units: [128]}\n"
                         "data: {train_samples: 12000, test_samples: 2000}\n"
                         "training: {epochs: 8, threads: 1}\nresources: {cpus: 1}\n";
  auto submit = weftd_->Cli({"submit", file});
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  const std::string id = testing::SubmittedJobId(submit.output);
  ASSERT_EQ(weftd_->WaitForJob(id, {"RUNNING"}, 60)["state"], "RUNNING");
  ASSERT_TRUE(pg_->StopServer());
  auto down = weftd_->Client().Get("/v1/jobs/" + id);
  ASSERT_TRUE(down);
  EXPECT_EQ(down->status, 503) << down->body;
  EXPECT_THAT(down->body, HasSubstr("the PostgreSQL store"));
  std::this_thread::sleep_for(std::chrono::seconds(4));
  EXPECT_TRUE(weftd_->Alive()) << weftd_->log();
  ASSERT_TRUE(pg_->StartServer());
  json done = weftd_->WaitForJob(id, {"COMPLETED", "FAILED"}, 240);
  ASSERT_EQ(done["state"], "COMPLETED") << done.dump(2) << weftd_->log();
  auto metrics = weftd_->Client().Get("/v1/jobs/" + id + "/metrics");
  ASSERT_TRUE(metrics && metrics->status == 200);
  const json points = json::parse(metrics->body)["points"];
  std::set<int> epochs;
  for (const auto& p : points) epochs.insert(p["epoch"].get<int>());
  EXPECT_EQ(epochs.size(), 8u) << "reports made while the database was down arrive afterwards";
  EXPECT_EQ(done["attempt"], 1) << "never restarted: " << done["history"].dump(2);
}

TEST_F(PostgresqlTest, AStoreThatCannotBeReachedStopsWeftdWithTheReason) {
  weftd_->Stop();
  WeftdProcess other(dir_ + "/other");
  other.set_args({"--store", "postgresql://weft@/weft?host=/nonexistent-dir&port=5999"});
  EXPECT_FALSE(other.Start());
  EXPECT_THAT(other.log(), HasSubstr("cannot connect to the PostgreSQL store"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/other/weft.db"));
}

}  // namespace
}  // namespace weft
