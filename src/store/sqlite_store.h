// The store on an embedded SQLite database (store/sqlite_database.h): the default store of a
// single weftd, which locks its data directory, so FindToken may keep the tokens it read.
#pragma once

#include <memory>
#include <string>

#include "store/sql_store.h"

namespace weft {

class SqliteStore final : public SqlStore {
 public:
  // Opens (creating if needed) the database at `path` and migrates its schema. Errors, and
  // `max_bytes`: SqliteDatabase::Open.
  static absl::StatusOr<std::unique_ptr<SqliteStore>> Open(const std::string& path,
                                                           int64_t max_bytes = 0);

 private:
  using SqlStore::SqlStore;
};

}  // namespace weft
