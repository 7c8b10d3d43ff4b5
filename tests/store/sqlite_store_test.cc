#include "store/sqlite_store.h"

#include <sqlite3.h>

#include <filesystem>
#include <fstream>

#include "store/sqlite_schema.h"
#include "store/store_tests.h"

namespace weft {
namespace {

std::unique_ptr<Store> MakeSqliteStore(const std::string& dir) {
  auto s = SqliteStore::Open(dir + "/weft.db");
  if (!s.ok()) {
    ADD_FAILURE() << s.status();
    return nullptr;
  }
  return std::move(*s);
}

INSTANTIATE_TEST_SUITE_P(Sqlite, StoreTest, ::testing::Values(&MakeSqliteStore));

TEST(SqliteStoreTest, RefusesAFileThatIsNotADatabase) {
  std::string path = "/tmp/weft-not-a-db-" + std::to_string(::getpid());
  std::ofstream(path) << "this is not sqlite, just text that is long enough to have a header.....";
  auto s = SqliteStore::Open(path);
  EXPECT_FALSE(s.ok());
  std::remove(path.c_str());
}

TEST(SqliteStoreTest, AFullStoreRefusesWritesAndKeepsWhatItHad) {
  char tmpl[] = "/tmp/weft-full-store-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  auto store = SqliteStore::Open(dir + "/weft.db", 192 << 10);
  ASSERT_TRUE(store.ok()) << store.status();
  JobRecord job;
  job.tenant = "t";
  job.manifest = std::string(2000, 'm');  // a few jobs per page
  int stored = 0;
  absl::Status full;
  for (; stored < 10000; ++stored) {
    job.id = "job-" + std::to_string(stored);
    full = (*store)->CreateJob(job, "submitted");
    if (!full.ok()) break;
  }
  EXPECT_TRUE(absl::IsResourceExhausted(full)) << full;
  EXPECT_NE(full.message().find("the store is full"), std::string_view::npos) << full;
  EXPECT_GT(stored, 5);
  // Nothing of the refused job, everything before it, and reads still work.
  EXPECT_TRUE(absl::IsNotFound((*store)->GetJob(job.id).status()));
  EXPECT_EQ(static_cast<Store&>(**store).ListJobs("t")->size(), static_cast<size_t>(stored));
  store->reset();
  auto reopened = SqliteStore::Open(dir + "/weft.db");
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ(static_cast<Store&>(**reopened).ListJobs("t")->size(), static_cast<size_t>(stored));
  std::filesystem::remove_all(dir);
}

// A store of version 5 (a job's models in `artifacts`) opens as the latest version with its models
// intact.
TEST(SqliteStoreTest, VersionFiveMigratesItsModelsToTheirOwnTable) {
  char tmpl[] = "/tmp/weft-migrate-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string path = dir + "/weft.db";
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(sqlite3_exec(db, sqlite::kMigrations[i], nullptr, nullptr, nullptr), SQLITE_OK) << i;
  }
  ASSERT_EQ(sqlite3_exec(db,
                         "INSERT INTO jobs (id, tenant, name, state, reason, manifest, spec_json, "
                         "created_ms, updated_ms, attempt, node, learner_pid, epoch, "
                         "epochs_total, step, steps_total, samples) VALUES ('job-a', 't', 'n', "
                         "'COMPLETED', 'r', 'm', '{}', 1, 2, 1, 'local', 0, 1, 1, 10, 10, 100);"
                         "INSERT INTO artifacts VALUES ('job-a', 'final', '/m.pt', '/c.json', "
                         "0.9, 1, 10, 123, 3);"
                         "INSERT INTO tenants VALUES ('t', 0, 0, 0, 0, 2, 1);"
                         "PRAGMA user_version=5;",
                         nullptr, nullptr, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(db);
  sqlite3_close(db);
  auto store = SqliteStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  auto models = (*store)->Models("job-a");
  ASSERT_TRUE(models.ok()) << models.status();
  ASSERT_EQ(models->size(), 1u);
  EXPECT_EQ((*models)[0].kind, "final");
  EXPECT_EQ((*models)[0].bytes, 123);
  EXPECT_TRUE((*store)->ListArtifacts("t")->empty());
  EXPECT_TRUE((*store)->PutArtifact({"t", "x", "aa", 1, 1}).ok());
  EXPECT_TRUE((*store)->ListDatasets()->empty()) << "version 7 has data sets, none registered";
  auto tenant = (*store)->GetTenant("t");
  ASSERT_TRUE(tenant.ok()) << tenant.status();
  EXPECT_EQ(tenant->weight, 2);
  EXPECT_FALSE(tenant->disk_quota_mb.has_value()) << "version 8's disk quota: unset, the default";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace weft
