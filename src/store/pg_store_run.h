// PgStore's session and PgStore::Run (internal to store/; included by the pg_store*.cc files).
#pragma once

#include <chrono>
#include <memory>
#include <utility>

#include "store/pg_query.h"
#include "store/pg_store.h"

namespace weft {

struct PgStore::Session {
  std::unique_ptr<pqxx::connection> conn;
  pg::Statements stmts;
};

template <typename Body>
auto PgStore::Run(const std::string& what, Mode mode, Body body)
    -> decltype(body(std::declval<pg::Tx&>())) {
  using Result = decltype(body(std::declval<pg::Tx&>()));
  absl::MutexLock lock(&mu_);
  if (absl::Status s = ConnectLocked(); !s.ok()) return s;
  pqxx::connection& conn = *session_->conn;
  const auto begun = std::chrono::steady_clock::now();
  try {
    auto in = [&](auto& txn) -> Result {
      pg::Tx tx(txn, conn, session_->stmts);
      Result out = body(tx);
      if (out.ok() && mode == Mode::kWrite) {
        txn.commit();
        store_metrics::ObserveCommit(
            "postgresql",
            std::chrono::duration<double>(std::chrono::steady_clock::now() - begun).count());
      }
      return out;
    };
    switch (mode) {
      case Mode::kWrite: {
        pqxx::work txn(conn);
        return in(txn);
      }
      case Mode::kSnapshot: {
        pqxx::transaction<pqxx::repeatable_read, pqxx::read_only> txn(conn);
        return in(txn);
      }
      case Mode::kRead:
        break;
    }
    pqxx::read_transaction txn(conn);
    return in(txn);
  } catch (const std::exception&) {
    absl::Status error = pg::Error(what);
    if (!conn.is_open()) session_.reset();  // connect again on the next call
    return error;
  }
}

}  // namespace weft
