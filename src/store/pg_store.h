// The store on a PostgreSQL database (store/pg_database.h): what a weftd uses when its metadata
// must outlive the host it runs on, and what several weftds in active/standby share. Same
// behaviour as the SQLite store — the shared store test suite runs on both — but FindToken asks
// the database every time (another weftd on the same database may revoke a token), and the
// weftds that share it elect a leader through it (leadership(); pg_leadership.h).
#pragma once

#include <memory>
#include <string>

#include "store/leadership.h"
#include "store/sql_store.h"

namespace weft {

class PgDatabase;

class PgStore final : public SqlStore {
 public:
  // Connects and migrates: PgDatabase::Open, with its errors.
  static absl::StatusOr<std::unique_ptr<PgStore>> Open(const std::string& uri);
  ~PgStore() override;

  // "user@host:port/dbname" of the connection: what a log may show (never the password).
  std::string Describe();
  // The leader election among the weftds that share this database; its Fence fences this
  // store's writes.
  Leadership& leadership() { return *leadership_; }

 private:
  explicit PgStore(std::shared_ptr<PgDatabase> db);

  const std::shared_ptr<PgDatabase> db_;
  const std::unique_ptr<Leadership> leadership_;
};

}  // namespace weft
