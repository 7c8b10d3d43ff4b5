// The SQL driver (store/sql.h) on an embedded SQLite database: one connection, WAL journal,
// synchronous=FULL (a commit that returned is on disk), foreign keys on. Every transaction runs
// under one mutex, so reads see no write half done and writes run one at a time; statements are
// prepared once per connection and kept.
#pragma once

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "store/sql.h"

struct sqlite3;

namespace weft {
namespace sqlite {
class StatementCache;
}

class SqliteDatabase final : public sql::Database {
 public:
  // Opens (creating if needed) the database at `path` and migrates its schema
  // (store/schema.h). Internal with SQLite's message if the file cannot be opened or is
  // not a weft database; FailedPrecondition if its schema is newer than this weftd's.
  // `max_bytes` > 0 caps the database's size (in pages of SQLite's page size): a write beyond it
  // fails as on a full disk. Every write that fails for room — the cap or the disk — is
  // ResourceExhausted and changes nothing (its transaction is rolled back).
  static absl::StatusOr<std::unique_ptr<SqliteDatabase>> Open(const std::string& path,
                                                              int64_t max_bytes = 0);
  ~SqliteDatabase() override;
  SqliteDatabase(const SqliteDatabase&) = delete;
  SqliteDatabase& operator=(const SqliteDatabase&) = delete;

  const sql::Dialect& dialect() const override;
  // kRead and kSnapshot run under the mutex without BEGIN (no other writer exists: weftd locks
  // its data directory); kWrite and kElection in BEGIN IMMEDIATE … COMMIT.
  absl::Status Transact(const std::string& what, sql::Mode mode,
                        absl::FunctionRef<absl::Status(sql::Tx&)> body) override;

 private:
  explicit SqliteDatabase(sqlite3* db);
  absl::Status Migrate();
  absl::Status LimitSize(int64_t max_bytes);
  // Runs SQL text (no bound values): pragmas and migrations.
  absl::Status Exec(const std::string& sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<int64_t> Pragma(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  sqlite3* const db_ ABSL_GUARDED_BY(mu_);
  const std::unique_ptr<sqlite::StatementCache> stmts_ ABSL_PT_GUARDED_BY(mu_);
};

}  // namespace weft
