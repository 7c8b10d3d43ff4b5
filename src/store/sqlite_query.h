// The SQLite store's query helpers (internal to store/): prepared statements bound from
// arguments in order, transactions, and one way to run a query and read its rows. Every error
// is a Status naming what was being done and SQLite's message.
#pragma once

#include <sqlite3.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "store/commit_metric.h"

namespace weft::sqlite {

// Internal, or ResourceExhausted when the disk (or the store's --max-store-bytes) is full.
inline absl::Status Error(sqlite3* db, const std::string& what) {
  if (sqlite3_errcode(db) == SQLITE_FULL) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the store is full (its disk, or weftd --max-store-bytes): ", what, ": ",
                     sqlite3_errmsg(db), "; nothing of this request was stored"));
  }
  return absl::InternalError(absl::StrCat("sqlite: ", what, ": ", sqlite3_errmsg(db)));
}

// A connection's prepared statements, kept for its life and keyed by their SQL: a store runs
// the same few dozen statements over and over, and compiling one costs more than running it
// (SQLite's parser was a third of a status read's time). Not thread-safe: one per connection,
// used under the connection's lock, and cleared before the connection is closed.
class StatementCache {
 public:
  explicit StatementCache(sqlite3* db) : db_(db) {}
  ~StatementCache() { Clear(); }
  StatementCache(const StatementCache&) = delete;
  StatementCache& operator=(const StatementCache&) = delete;

  // The statement for `sql`, prepared on first use; nullptr if it does not compile (the error
  // is the connection's). A statement is used by one Stmt at a time.
  sqlite3_stmt* Get(const std::string& sql) {
    auto it = stmts_.find(sql);
    if (it != stmts_.end()) return it->second;
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v3(db_, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr) !=
        SQLITE_OK) {
      sqlite3_finalize(stmt);
      return nullptr;
    }
    return stmts_.emplace(sql, stmt).first->second;
  }
  void Clear() {
    for (auto& [sql, stmt] : stmts_) sqlite3_finalize(stmt);
    stmts_.clear();
  }
  sqlite3* db() const { return db_; }

 private:
  sqlite3* const db_;
  std::map<std::string, sqlite3_stmt*> stmts_;
};

// One use of a cached statement: reset and unbound again on scope exit, so it holds no read
// transaction open. Bind* take 1-based indexes.
class Stmt {
 public:
  Stmt(StatementCache& cache, const std::string& sql) : db_(cache.db()), stmt_(cache.Get(sql)) {}
  ~Stmt() {
    if (stmt_ != nullptr) {
      sqlite3_reset(stmt_);
      sqlite3_clear_bindings(stmt_);
    }
  }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  absl::Status Prepared() const {
    return stmt_ != nullptr ? absl::OkStatus() : Error(db_, "prepare");
  }
  void Bind(int i, const std::string& v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  void Bind(int i, const char* v) { Bind(i, std::string(v)); }
  void Bind(int i, int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  void Bind(int i, int v) { sqlite3_bind_int64(stmt_, i, v); }
  void Bind(int i, bool v) { sqlite3_bind_int64(stmt_, i, v ? 1 : 0); }
  void Bind(int i, double v) { sqlite3_bind_double(stmt_, i, v); }
  void Bind(int i, std::nullopt_t) { sqlite3_bind_null(stmt_, i); }
  template <typename T>
  void Bind(int i, const std::optional<T>& v) {
    if (v) {
      Bind(i, *v);
    } else {
      Bind(i, std::nullopt);
    }
  }
  // Binds `args` to ?1, ?2, ...
  template <typename... Args>
  void BindAll(const Args&... args) {
    int i = 0;
    (Bind(++i, args), ...);
  }

  // SQLITE_ROW, SQLITE_DONE or an error code.
  int Step() { return sqlite3_step(stmt_); }
  std::string Text(int col) {
    const unsigned char* p = sqlite3_column_text(stmt_, col);
    return p ? std::string(reinterpret_cast<const char*>(p), sqlite3_column_bytes(stmt_, col))
             : std::string();
  }
  int64_t Int(int col) { return sqlite3_column_int64(stmt_, col); }
  double Real(int col) { return sqlite3_column_double(stmt_, col); }
  bool IsNull(int col) { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::optional<double> OptReal(int col) {
    return IsNull(col) ? std::nullopt : std::optional<double>(Real(col));
  }
  std::optional<int64_t> OptInt(int col) {
    return IsNull(col) ? std::nullopt : std::optional<int64_t>(Int(col));
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_;
};

// Runs a statement that returns no rows, with `args` bound to ?1, ?2, ... Returns the number of
// rows it changed. AlreadyExists if it broke a constraint (a duplicate key); Internal otherwise.
template <typename... Args>
absl::StatusOr<int> Execute(StatementCache& cache, const std::string& what, const std::string& sql,
                            const Args&... args) {
  sqlite3* db = cache.db();
  Stmt s(cache, sql);
  if (absl::Status p = s.Prepared(); !p.ok()) return p;
  s.BindAll(args...);
  int rc = s.Step();
  if (rc == SQLITE_CONSTRAINT)
    return absl::AlreadyExistsError(absl::StrCat(what, ": already exists"));
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) return Error(db, what);
  return sqlite3_changes(db);
}

// Runs a query with `args` bound to ?1, ?2, ... and reads every row with `read(Stmt&)`.
template <typename T, typename Read, typename... Args>
absl::StatusOr<std::vector<T>> Query(StatementCache& cache, const std::string& what,
                                     const std::string& sql, Read read, const Args&... args) {
  Stmt s(cache, sql);
  if (absl::Status p = s.Prepared(); !p.ok()) return p;
  s.BindAll(args...);
  std::vector<T> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) out.push_back(read(s));
  if (rc != SQLITE_DONE) return Error(cache.db(), what);
  return out;
}

// The first row of a query; NotFound(`not_found`) when there is none.
template <typename T, typename Read, typename... Args>
absl::StatusOr<T> QueryOne(StatementCache& cache, const std::string& what,
                           const std::string& not_found, const std::string& sql, Read read,
                           const Args&... args) {
  absl::StatusOr<std::vector<T>> rows = Query<T>(cache, what, sql + " LIMIT 1", read, args...);
  if (!rows.ok()) return rows.status();
  if (rows->empty()) return absl::NotFoundError(not_found);
  return std::move(rows->front());
}

// BEGIN IMMEDIATE ... COMMIT, rolled back unless Commit() succeeded.
class Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db), begun_(std::chrono::steady_clock::now()) {
    ok_ = sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK;
  }
  ~Transaction() {
    if (ok_ && !committed_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  absl::Status Begun() const { return ok_ ? absl::OkStatus() : Error(db_, "begin"); }
  absl::Status Commit() {
    if (sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) {
      return Error(db_, "commit");
    }
    committed_ = true;
    store_metrics::ObserveCommit(
        "sqlite", std::chrono::duration<double>(std::chrono::steady_clock::now() - begun_).count());
    return absl::OkStatus();
  }

 private:
  sqlite3* db_;
  std::chrono::steady_clock::time_point begun_;
  bool ok_ = false;
  bool committed_ = false;
};

}  // namespace weft::sqlite
