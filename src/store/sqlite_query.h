// The SQLite store's query helpers (internal to store/): prepared statements bound from
// arguments in order, transactions, and one way to run a query and read its rows. Every error
// is a Status naming what was being done and SQLite's message.
#pragma once

#include <sqlite3.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace weft::sqlite {

inline absl::Status Error(sqlite3* db, const std::string& what) {
  return absl::InternalError(absl::StrCat("sqlite: ", what, ": ", sqlite3_errmsg(db)));
}

// A prepared statement, finalized on scope exit. Bind* take 1-based indexes.
class Stmt {
 public:
  Stmt(sqlite3* db, const std::string& sql) : db_(db) {
    rc_ = sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt_, nullptr);
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  absl::Status Prepared() const {
    return rc_ == SQLITE_OK ? absl::OkStatus() : Error(db_, "prepare");
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
  sqlite3_stmt* stmt_ = nullptr;
  int rc_;
};

// Runs a statement that returns no rows, with `args` bound to ?1, ?2, ... Returns the number of
// rows it changed. AlreadyExists if it broke a constraint (a duplicate key); Internal otherwise.
template <typename... Args>
absl::StatusOr<int> Execute(sqlite3* db, const std::string& what, const std::string& sql,
                            const Args&... args) {
  Stmt s(db, sql);
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
absl::StatusOr<std::vector<T>> Query(sqlite3* db, const std::string& what, const std::string& sql,
                                     Read read, const Args&... args) {
  Stmt s(db, sql);
  if (absl::Status p = s.Prepared(); !p.ok()) return p;
  s.BindAll(args...);
  std::vector<T> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) out.push_back(read(s));
  if (rc != SQLITE_DONE) return Error(db, what);
  return out;
}

// The first row of a query; NotFound(`not_found`) when there is none.
template <typename T, typename Read, typename... Args>
absl::StatusOr<T> QueryOne(sqlite3* db, const std::string& what, const std::string& not_found,
                           const std::string& sql, Read read, const Args&... args) {
  absl::StatusOr<std::vector<T>> rows = Query<T>(db, what, sql + " LIMIT 1", read, args...);
  if (!rows.ok()) return rows.status();
  if (rows->empty()) return absl::NotFoundError(not_found);
  return std::move(rows->front());
}

// BEGIN IMMEDIATE ... COMMIT, rolled back unless Commit() succeeded.
class Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db) {
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
    return absl::OkStatus();
  }

 private:
  sqlite3* db_;
  bool ok_ = false;
  bool committed_ = false;
};

}  // namespace weft::sqlite
