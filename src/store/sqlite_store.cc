#include "store/sqlite_store.h"

#include "store/sqlite_database.h"

namespace weft {

absl::StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::string& path,
                                                               int64_t max_bytes) {
  absl::StatusOr<std::unique_ptr<SqliteDatabase>> db = SqliteDatabase::Open(path, max_bytes);
  if (!db.ok()) return db.status();
  return std::unique_ptr<SqliteStore>(
      new SqliteStore(std::shared_ptr<sql::Database>(*std::move(db)), /*cache_tokens=*/true));
}

}  // namespace weft
