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
  absl::StatusOr<std::unique_ptr<Session>> session = Acquire();
  if (!session.ok()) return session.status();
  pqxx::connection& conn = *(*session)->conn;
  const auto begun = std::chrono::steady_clock::now();
  Result out = absl::InternalError("unset");
  try {
    auto in = [&](auto& txn) -> Result {
      pg::Tx tx(txn, conn, (*session)->stmts);
      if (mode == Mode::kWrite) {
        if (absl::Status fence = CheckFence(tx); !fence.ok()) return fence;
      }
      Result result = body(tx);
      if (result.ok() && (mode == Mode::kWrite || mode == Mode::kElection)) {
        txn.commit();
        store_metrics::ObserveCommit(
            "postgresql",
            std::chrono::duration<double>(std::chrono::steady_clock::now() - begun).count());
      }
      return result;
    };
    if (mode == Mode::kWrite || mode == Mode::kElection) {
      pqxx::work txn(conn);
      out = in(txn);
    } else if (mode == Mode::kSnapshot) {
      pqxx::transaction<pqxx::repeatable_read, pqxx::read_only> txn(conn);
      out = in(txn);
    } else {
      pqxx::nontransaction txn(conn);
      out = in(txn);
    }
  } catch (const std::exception&) {
    out = pg::Error(what);
  }
  Release(*std::move(session));
  return out;
}

}  // namespace weft
