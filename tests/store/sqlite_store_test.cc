#include "store/sqlite_store.h"

#include <sqlite3.h>

#include <filesystem>
#include <fstream>

#include "store/schema.h"
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

// The one schema source gives each database its own migrations: every type spelled in the
// dialect, and the version numbers deployed stores carry (SQLite 14, PostgreSQL 7) unchanged.
TEST(SchemaTest, EachDatabaseGetsItsOwnSpellingAndVersions) {
  using schema::Dialect;
  EXPECT_EQ(schema::LatestVersion(Dialect::kSqlite), 14);
  EXPECT_EQ(schema::LatestVersion(Dialect::kPostgres), 7);
  for (Dialect d : {Dialect::kSqlite, Dialect::kPostgres}) {
    const int latest = schema::LatestVersion(d);
    EXPECT_EQ(schema::Migration(d, 0), "");
    EXPECT_EQ(schema::Migration(d, latest + 1), "");
    for (int to = 1; to <= latest; ++to) {
      const std::string sql = schema::Migration(d, to);
      EXPECT_FALSE(sql.empty()) << to;  // every version changes something
      EXPECT_EQ(sql.find('{'), std::string::npos) << to << ": a type left unspelled";
    }
  }
  const std::string pg_first = schema::Migration(Dialect::kPostgres, 1);
  EXPECT_NE(pg_first.find("seq BIGSERIAL PRIMARY KEY"), std::string::npos);
  EXPECT_NE(pg_first.find("has_quota BOOLEAN"), std::string::npos);
  EXPECT_NE(pg_first.find("CREATE TABLE webhook_deliveries"), std::string::npos)
      << "PostgreSQL's version 1 is SQLite's 1 to 9";
  EXPECT_EQ(pg_first.find("weft_leader"), std::string::npos);
  EXPECT_NE(schema::Migration(Dialect::kPostgres, 2).find("weft_leader"), std::string::npos);
  std::string sqlite_all;
  for (int to = 1; to <= 13; ++to) sqlite_all += schema::Migration(Dialect::kSqlite, to);
  EXPECT_NE(sqlite_all.find("seq INTEGER PRIMARY KEY AUTOINCREMENT"), std::string::npos);
  for (const char* pg_only : {"BIGINT", "BIGSERIAL", "BOOLEAN", "TIMESTAMPTZ", "weft_leader"}) {
    EXPECT_EQ(sqlite_all.find(pg_only), std::string::npos) << pg_only;
  }
}

// A store of version 5 (a job's models in `artifacts`) opens as the latest version with its models
// intact.
TEST(SqliteStoreTest, VersionFiveMigratesItsModelsToTheirOwnTable) {
  char tmpl[] = "/tmp/weft-migrate-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string path = dir + "/weft.db";
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  for (int to = 1; to <= 5; ++to) {
    const std::string sql = schema::Migration(schema::Dialect::kSqlite, to);
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << to;
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
