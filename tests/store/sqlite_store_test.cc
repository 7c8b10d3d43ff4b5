#include "store/sqlite_store.h"

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

}  // namespace
}  // namespace weft
