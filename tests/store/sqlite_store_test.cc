#include "store/sqlite_store.h"

#include <filesystem>
#include <fstream>

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
  auto store = SqliteStore::Open(dir + "/weft.db", 128 << 10);
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

}  // namespace
}  // namespace weft
