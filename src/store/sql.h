// A thin SQL driver (internal to store/): what the one store implementation (sql_store.h) needs
// of a database, implemented for SQLite (sqlite_database.h) and PostgreSQL (pg_database.h).
// Statements are written once, in the SQL both accept, with parameters $1, $2, ...; where the
// dialects differ, the difference has a name in Dialect or is a call of Tx (Lock).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace weft::sql {

// A parameter's value.
struct Null {};
using Value = std::variant<Null, int64_t, double, bool, std::string>;

inline Value ToValue(const std::string& v) { return v; }
inline Value ToValue(const char* v) { return std::string(v); }
inline Value ToValue(int64_t v) { return v; }
inline Value ToValue(int v) { return int64_t{v}; }
inline Value ToValue(bool v) { return v; }
inline Value ToValue(double v) { return v; }
inline Value ToValue(std::nullopt_t) { return Null{}; }
template <typename T>
Value ToValue(const std::optional<T>& v) {
  return v ? ToValue(*v) : Value(Null{});
}

// One row of a result, valid only inside the callback it is passed to. Columns are 0-based;
// a NULL reads as "" / 0 / false.
class Row {
 public:
  virtual ~Row() = default;
  virtual bool IsNull(int col) const = 0;
  virtual std::string Text(int col) const = 0;
  virtual int64_t Int(int col) const = 0;
  virtual double Real(int col) const = 0;
  virtual bool Bool(int col) const = 0;
  std::optional<int64_t> OptInt(int col) const {
    return IsNull(col) ? std::nullopt : std::optional<int64_t>(Int(col));
  }
  std::optional<double> OptReal(int col) const {
    return IsNull(col) ? std::nullopt : std::optional<double>(Real(col));
  }
};

// What the two dialects spell differently, by name.
struct Dialect {
  std::string name;  // "sqlite" or "postgresql": the label of the store's commit metric
  // Appended to a SELECT whose rows the transaction goes on to write: " FOR UPDATE" where rows
  // must be locked (PostgreSQL, READ COMMITTED); "" where write transactions run one at a time
  // anyway (SQLite, BEGIN IMMEDIATE).
  std::string for_update;
  // The function f(haystack, needle) giving needle's 1-based position in haystack, 0 if absent.
  std::string position;
  // job_events' leader_epoch: ", leader_epoch" and the value it gets in an INSERT … SELECT
  // (PostgreSQL, where weftds elect a leader); "" and "" in SQLite, which has no such column.
  std::string event_epoch_column;
  std::string event_epoch_value;
};

// What a transaction runs as: one statement on its own or several as of one instant (reads),
// a read-write transaction committed when its body returns OK, first checking the database's
// write check (fencing, pg_leadership.h), or such a one without the check (a campaign for the
// leader lease).
enum class Mode { kRead, kSnapshot, kWrite, kElection };

// One transaction. Every call returns a Status naming `what` was being done: AlreadyExists for a
// broken unique constraint, ResourceExhausted when the store is full, Unavailable when the
// server cannot be reached, Internal otherwise.
class Tx {
 public:
  virtual ~Tx() = default;
  virtual const Dialect& dialect() const = 0;

  // Runs `sql` with `params` bound to $1, $2, ..., calls `row` for each row it returns, and
  // answers the number of rows an INSERT, UPDATE or DELETE changed.
  virtual absl::StatusOr<int64_t> Run(const std::string& what, const std::string& sql,
                                      const std::vector<Value>& params,
                                      absl::FunctionRef<void(const Row&)> row) = 0;

  // Makes every other transaction that locks the same (`space`, `key`), in any process, wait
  // until this one ends. A no-op where write transactions run one at a time (SQLite).
  virtual absl::Status Lock(int32_t space, const std::string& key) = 0;

  // A statement that returns no rows: the number of rows it changed.
  template <typename... Args>
  absl::StatusOr<int64_t> Execute(const std::string& what, const std::string& sql,
                                  const Args&... args) {
    return Run(what, sql, {ToValue(args)...}, [](const Row&) {});
  }
  // Every row `sql` returns, each read with `read(const Row&) -> T`.
  template <typename T, typename Read, typename... Args>
  absl::StatusOr<std::vector<T>> Query(const std::string& what, const std::string& sql, Read read,
                                       const Args&... args) {
    std::vector<T> out;
    absl::StatusOr<int64_t> n =
        Run(what, sql, {ToValue(args)...}, [&](const Row& row) { out.push_back(read(row)); });
    if (!n.ok()) return n.status();
    return out;
  }
  // The first row `sql` returns; NotFound(`not_found`) when there is none.
  template <typename T, typename Read, typename... Args>
  absl::StatusOr<T> QueryOne(const std::string& what, const std::string& not_found,
                             const std::string& sql, Read read, const Args&... args) {
    absl::StatusOr<std::vector<T>> rows = Query<T>(what, sql, read, args...);
    if (!rows.ok()) return rows.status();
    if (rows->empty()) return absl::NotFoundError(not_found);
    return std::move(rows->front());
  }
  // A query's single number (a COUNT); 0 for no row or NULL.
  template <typename... Args>
  absl::StatusOr<int64_t> Count(const std::string& what, const std::string& sql,
                                const Args&... args) {
    absl::StatusOr<std::vector<int64_t>> rows = Query<int64_t>(
        what, sql, [](const Row& r) { return r.Int(0); }, args...);
    if (!rows.ok()) return rows.status();
    return rows->empty() ? 0 : rows->front();
  }
};

inline absl::Status StatusOf(const absl::Status& s) { return s; }
template <typename T>
absl::Status StatusOf(const absl::StatusOr<T>& s) {
  return s.status();
}

// A database: transactions on it. Thread-safe.
class Database {
 public:
  virtual ~Database() = default;
  virtual const Dialect& dialect() const = 0;

  // Runs `body` in one transaction of `mode` and, for kWrite and kElection, commits it when
  // `body` returns OK (rolled back otherwise). `body`'s error, or the commit's, comes back.
  virtual absl::Status Transact(const std::string& what, Mode mode,
                                absl::FunctionRef<absl::Status(Tx&)> body) = 0;

  // Transact for a `body` that returns a Status or a StatusOr<T>; returns what it returned, or
  // the commit's error.
  template <typename Body>
  auto Run(const std::string& what, Mode mode, Body body) -> decltype(body(std::declval<Tx&>())) {
    using Result = decltype(body(std::declval<Tx&>()));
    std::optional<Result> out;
    absl::Status done = Transact(what, mode, [&](Tx& tx) {
      out.emplace(body(tx));
      return StatusOf(*out);
    });
    if (!done.ok() || !out.has_value()) return done.ok() ? absl::InternalError(what) : done;
    return *std::move(out);
  }
};

}  // namespace weft::sql
