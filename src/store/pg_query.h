// The PostgreSQL store's query helpers (internal to store/): prepared statements named once per
// connection, and one way to run a transaction and turn libpqxx's exceptions into Statuses that
// name what was being done.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/text.h"
#include "store/commit_metric.h"

namespace weft::pg {

// A statement parameter. Text goes to TEXT columns, which PostgreSQL keeps as UTF-8: it
// refuses invalid UTF-8 and NUL bytes, which what learners report (and a request's path) may
// hold. Those become U+FFFD (common/text.h ValidUtf8), so such text is stored as readers would
// be shown it, and a lookup by such a key finds nothing instead of failing.
inline std::string Param(const std::string& s) { return ValidUtf8(s); }
inline std::optional<std::string> Param(const std::optional<std::string>& s) {
  if (!s) return std::nullopt;
  return ValidUtf8(*s);
}
template <typename T>
const T& Param(const T& v) {
  return v;
}

// A connection's prepared statements, named s0, s1, ... in the order first used and prepared
// on the server on first use. Forgotten with the connection (Reset).
class Statements {
 public:
  // The name `sql` is prepared under on `conn`.
  const std::string& Name(pqxx::connection& conn, const std::string& sql) {
    auto it = names_.find(sql);
    if (it != names_.end()) return it->second;
    std::string name = absl::StrCat("s", names_.size());
    conn.prepare(name, sql);
    return names_.emplace(sql, std::move(name)).first->second;
  }
  void Reset() { names_.clear(); }

 private:
  std::map<std::string, std::string> names_;
};

// A statement in a transaction: runs `sql` (prepared once per connection) with `args` as $1,
// $2, ... Throws libpqxx's exceptions, which Run turns into a Status.
class Tx {
 public:
  Tx(pqxx::transaction_base& tx, pqxx::connection& conn, Statements& stmts)
      : tx_(tx), conn_(conn), stmts_(stmts) {}

  template <typename... Args>
  pqxx::result Exec(const std::string& sql, const Args&... args) {
    return tx_.exec_prepared(stmts_.Name(conn_, sql), Param(args)...);
  }
  // Runs a script of several statements without parameters (a migration).
  void Script(const std::string& sql) { tx_.exec(sql); }
  // Rows `sql` returns, each read with `read(const pqxx::row&)`.
  template <typename T, typename Read, typename... Args>
  std::vector<T> Query(const std::string& sql, Read read, const Args&... args) {
    pqxx::result rows = Exec(sql, args...);
    std::vector<T> out;
    out.reserve(rows.size());
    for (const pqxx::row& row : rows) out.push_back(read(row));
    return out;
  }
  // The first row `sql` returns; NotFound(`not_found`) when there is none.
  template <typename T, typename Read, typename... Args>
  absl::StatusOr<T> QueryOne(const std::string& not_found, const std::string& sql, Read read,
                             const Args&... args) {
    pqxx::result rows = Exec(sql, args...);
    if (rows.empty()) return absl::NotFoundError(not_found);
    return read(rows[0]);
  }
  // A query's single number (a COUNT).
  template <typename... Args>
  int64_t Count(const std::string& sql, const Args&... args) {
    pqxx::result rows = Exec(sql, args...);
    return rows.empty() || rows[0][0].is_null() ? 0 : rows[0][0].as<int64_t>();
  }

 private:
  pqxx::transaction_base& tx_;
  pqxx::connection& conn_;
  Statements& stmts_;
};

// Column readers: NULL as an empty optional.
inline std::optional<int64_t> OptInt(const pqxx::field& f) {
  return f.is_null() ? std::nullopt : std::optional<int64_t>(f.as<int64_t>());
}
inline std::optional<double> OptReal(const pqxx::field& f) {
  return f.is_null() ? std::nullopt : std::optional<double>(f.as<double>());
}
inline std::string Str(const pqxx::field& f) {
  return f.is_null() ? std::string() : std::string(f.c_str(), f.size());
}

// The Status for a libpqxx exception thrown while doing `what`:
//   unique_violation -> AlreadyExists; the disk full (SQLSTATE 53100) or out of memory ->
//   ResourceExhausted; the server unreachable, or a commit whose outcome is unknown ->
//   Unavailable; anything else -> Internal with the server's message.
absl::Status Error(const std::string& what);  // call inside a catch block

}  // namespace weft::pg
