// The SQL driver (store/sql.h) on a PostgreSQL database (libpqxx): what a weftd uses when its
// metadata must outlive the host it runs on (weftd --store postgresql://…).
//   - Writes are READ COMMITTED transactions; a SELECT … FOR UPDATE (Dialect::for_update) locks
//     the rows a transaction goes on to write. A commit that returned is as durable as the
//     server's synchronous_commit makes it.
//   - kSnapshot is one REPEATABLE READ, read-only transaction; kRead one statement on its own.
//   - Text is kept as UTF-8: bytes that are not (and NUL) are stored as U+FFFD
//     (common/text.h ValidUtf8), so such text is stored as readers would be shown it, and a
//     lookup by such a key finds nothing instead of failing.
//   - Transactions run on a pool of up to kMaxSessions connections, so calls do not queue
//     behind one another's round trips. A connection that breaks is dropped with every idle one
//     (they went with the same server); the call that saw it fails with Unavailable, the next
//     connects again.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "store/sql.h"

namespace weft {

class PgDatabase final : public sql::Database {
 public:
  static constexpr int kMaxSessions = 4;

  // Connects to the database `uri` names — a libpq connection URI (postgresql://user@host:port/
  // db?options, host may be a unix socket directory) — and migrates its schema
  // (store/schema.h). Unavailable if the server cannot be reached or refuses the login;
  // FailedPrecondition if the database's schema is newer than this weftd's; Internal otherwise.
  static absl::StatusOr<std::unique_ptr<PgDatabase>> Open(const std::string& uri);
  ~PgDatabase() override;
  PgDatabase(const PgDatabase&) = delete;
  PgDatabase& operator=(const PgDatabase&) = delete;

  // "user@host:port/dbname" of the connection: what a log may show (never the password).
  std::string Describe();

  const sql::Dialect& dialect() const override;
  absl::Status Transact(const std::string& what, sql::Mode mode,
                        absl::FunctionRef<absl::Status(sql::Tx&)> body) override;

  // From now on every kWrite transaction first runs `check` in itself and is refused (rolled
  // back, `check`'s error returned) unless it is OK: how a leader fences its writes
  // (pg_leadership.h).
  void SetWriteCheck(std::function<absl::Status(sql::Tx&)> check);

  struct Session;  // a connection and its prepared statements

 private:
  explicit PgDatabase(std::string uri);
  absl::Status Migrate();
  // An idle session, or a new connection while fewer than kMaxSessions exist; waits for one
  // otherwise. Unavailable if the server cannot be reached.
  absl::StatusOr<std::unique_ptr<Session>> Acquire();
  // Back to the idle ones; a broken one is dropped with every idle one.
  void Release(std::unique_ptr<Session> session);

  const std::string uri_;
  absl::Mutex mu_;
  absl::CondVar released_;  // a session went back to idle_, or one was dropped
  std::vector<std::unique_ptr<Session>> idle_ ABSL_GUARDED_BY(mu_);
  int sessions_ ABSL_GUARDED_BY(mu_) = 0;  // idle or in use
  absl::Mutex check_mu_;
  std::shared_ptr<const std::function<absl::Status(sql::Tx&)>> write_check_
      ABSL_GUARDED_BY(check_mu_);
};

}  // namespace weft
