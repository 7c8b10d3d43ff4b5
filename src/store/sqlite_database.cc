// The SQL driver on SQLite: statements kept per connection, parameters bound by name ($1, $2,
// ...), and errors as Statuses (store/sql.h).
#include "store/sqlite_database.h"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "store/commit_metric.h"
#include "store/schema.h"

namespace weft {
namespace sqlite {
namespace {

// Internal, or ResourceExhausted when the disk (or the store's --max-store-bytes) is full.
absl::Status Error(sqlite3* db, const std::string& what) {
  if (sqlite3_errcode(db) == SQLITE_FULL) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the store is full (its disk, or weftd --max-store-bytes): ", what, ": ",
                     sqlite3_errmsg(db), "; nothing of this request was stored"));
  }
  return absl::InternalError(absl::StrCat("sqlite: ", what, ": ", sqlite3_errmsg(db)));
}

}  // namespace

// A prepared statement and where each of its parameters binds: at[N - 1] is the index of "$N"
// in the statement (0 when the statement does not use it), found once when it is prepared.
struct Prepared {
  sqlite3_stmt* stmt = nullptr;
  std::vector<int> at;
};

// A connection's prepared statements, kept for its life and keyed by their SQL: a store runs
// the same few dozen statements over and over, and compiling one costs more than running it
// (SQLite's parser was a third of a status read's time). Used under the connection's lock, and
// cleared before the connection is closed.
class StatementCache {
 public:
  explicit StatementCache(sqlite3* db) : db_(db) {}
  ~StatementCache() { Clear(); }
  StatementCache(const StatementCache&) = delete;
  StatementCache& operator=(const StatementCache&) = delete;

  // The statement for `sql`, prepared on first use; nullptr if it does not compile (the error
  // is the connection's).
  const Prepared* Get(const std::string& sql) {
    auto it = stmts_.find(sql);
    if (it != stmts_.end()) return &it->second;
    Prepared p;
    if (sqlite3_prepare_v3(db_, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &p.stmt, nullptr) !=
        SQLITE_OK) {
      sqlite3_finalize(p.stmt);
      return nullptr;
    }
    for (int i = 1; i <= sqlite3_bind_parameter_count(p.stmt); ++i) {
      const char* name = sqlite3_bind_parameter_name(p.stmt, i);
      int n = 0;  // "$N" names parameter N; the store writes no other kind
      if (name != nullptr && name[0] == '$' && absl::SimpleAtoi(name + 1, &n) && n > 0) {
        if (p.at.size() < static_cast<size_t>(n)) p.at.resize(n, 0);
        p.at[n - 1] = i;
      }
    }
    return &stmts_.emplace(sql, std::move(p)).first->second;
  }
  void Clear() {
    for (auto& [sql, p] : stmts_) sqlite3_finalize(p.stmt);
    stmts_.clear();
  }
  sqlite3* db() const { return db_; }

 private:
  sqlite3* const db_;
  std::unordered_map<std::string, Prepared> stmts_;
};

namespace {

class StmtRow final : public sql::Row {
 public:
  explicit StmtRow(sqlite3_stmt* stmt) : stmt_(stmt) {}
  bool IsNull(int col) const override { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::string Text(int col) const override {
    const unsigned char* p = sqlite3_column_text(stmt_, col);
    return p ? std::string(reinterpret_cast<const char*>(p), sqlite3_column_bytes(stmt_, col))
             : std::string();
  }
  int64_t Int(int col) const override { return sqlite3_column_int64(stmt_, col); }
  double Real(int col) const override { return sqlite3_column_double(stmt_, col); }
  bool Bool(int col) const override { return Int(col) != 0; }

 private:
  sqlite3_stmt* const stmt_;
};

void Bind(sqlite3_stmt* stmt, int i, const sql::Value& value) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, sql::Null>) {
          sqlite3_bind_null(stmt, i);
        } else if constexpr (std::is_same_v<T, int64_t>) {
          sqlite3_bind_int64(stmt, i, v);
        } else if constexpr (std::is_same_v<T, bool>) {
          sqlite3_bind_int64(stmt, i, v ? 1 : 0);
        } else if constexpr (std::is_same_v<T, double>) {
          sqlite3_bind_double(stmt, i, v);
        } else {
          sqlite3_bind_text(stmt, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
        }
      },
      value);
}

// A statement in use: reset and unbound again on scope exit, so it holds no read transaction
// open.
class InUse {
 public:
  explicit InUse(sqlite3_stmt* stmt) : stmt_(stmt) {}
  ~InUse() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  InUse(const InUse&) = delete;
  InUse& operator=(const InUse&) = delete;

 private:
  sqlite3_stmt* const stmt_;
};

class StatementTx final : public sql::Tx {
 public:
  explicit StatementTx(StatementCache& stmts) : stmts_(stmts) {}
  const sql::Dialect& dialect() const override;

  absl::StatusOr<int64_t> Run(const std::string& what, const std::string& sql,
                              const std::vector<sql::Value>& params,
                              absl::FunctionRef<void(const sql::Row&)> row) override {
    sqlite3* db = stmts_.db();
    const Prepared* prepared = stmts_.Get(sql);
    if (prepared == nullptr) return Error(db, absl::StrCat(what, ": prepare"));
    sqlite3_stmt* stmt = prepared->stmt;
    InUse in_use(stmt);
    for (size_t i = 0; i < params.size() && i < prepared->at.size(); ++i) {
      if (prepared->at[i] > 0) Bind(stmt, prepared->at[i], params[i]);
    }
    const StmtRow current(stmt);
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) row(current);
    if (rc == SQLITE_CONSTRAINT) {
      return absl::AlreadyExistsError(absl::StrCat(what, ": already exists"));
    }
    if (rc != SQLITE_DONE) return Error(db, what);
    return sqlite3_changes(db);
  }

  // Write transactions run one at a time (BEGIN IMMEDIATE under the database's mutex).
  absl::Status Lock(int32_t, const std::string&) override { return absl::OkStatus(); }

 private:
  StatementCache& stmts_;
};

const sql::Dialect& SqliteDialect() {
  static const sql::Dialect* const kDialect = new sql::Dialect{"sqlite", "", "instr", "", ""};
  return *kDialect;
}

const sql::Dialect& StatementTx::dialect() const { return SqliteDialect(); }

}  // namespace
}  // namespace sqlite

absl::StatusOr<std::unique_ptr<SqliteDatabase>> SqliteDatabase::Open(const std::string& path,
                                                                     int64_t max_bytes) {
  sqlite3* db = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    absl::Status s = absl::InternalError(
        absl::StrCat("cannot open store ", path, ": ", db ? sqlite3_errmsg(db) : "out of memory"));
    sqlite3_close(db);
    return s;
  }
  sqlite3_busy_timeout(db, 5000);
  std::unique_ptr<SqliteDatabase> database(new SqliteDatabase(db));
  RETURN_IF_ERROR(database->Migrate());
  if (max_bytes > 0) RETURN_IF_ERROR(database->LimitSize(max_bytes));
  return database;
}

SqliteDatabase::SqliteDatabase(sqlite3* db)
    : db_(db), stmts_(std::make_unique<sqlite::StatementCache>(db)) {}

SqliteDatabase::~SqliteDatabase() {
  absl::MutexLock lock(&mu_);
  stmts_->Clear();  // sqlite3_close refuses a connection with statements left
  sqlite3_close(db_);
}

const sql::Dialect& SqliteDatabase::dialect() const { return sqlite::SqliteDialect(); }

absl::Status SqliteDatabase::Transact(const std::string& what, sql::Mode mode,
                                      absl::FunctionRef<absl::Status(sql::Tx&)> body) {
  absl::MutexLock lock(&mu_);
  sqlite::StatementTx tx(*stmts_);
  if (mode == sql::Mode::kRead || mode == sql::Mode::kSnapshot) return body(tx);
  const auto begun = std::chrono::steady_clock::now();
  if (sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK) {
    return sqlite::Error(db_, absl::StrCat(what, ": begin"));
  }
  absl::Status s = body(tx);
  if (s.ok() && sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) {
    s = sqlite::Error(db_, absl::StrCat(what, ": commit"));
  }
  if (!s.ok()) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    return s;
  }
  store_metrics::ObserveCommit(
      "sqlite", std::chrono::duration<double>(std::chrono::steady_clock::now() - begun).count());
  return s;
}

absl::Status SqliteDatabase::Exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return absl::InternalError(absl::StrCat("sqlite: ", msg));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> SqliteDatabase::Pragma(const std::string& name) {
  sqlite::StatementTx tx(*stmts_);
  return tx.Count(absl::StrCat("read ", name), absl::StrCat("PRAGMA ", name));
}

absl::Status SqliteDatabase::LimitSize(int64_t max_bytes) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(int64_t page, Pragma("page_size"));
  const int64_t pages = std::max<int64_t>(1, max_bytes / std::max<int64_t>(1, page));
  return Exec(absl::StrCat("PRAGMA max_page_count=", pages));
}

absl::Status SqliteDatabase::Migrate() {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(Exec("PRAGMA journal_mode=WAL"));
  RETURN_IF_ERROR(Exec("PRAGMA synchronous=FULL"));
  RETURN_IF_ERROR(Exec("PRAGMA foreign_keys=ON"));
  ASSIGN_OR_RETURN(const int64_t version, Pragma("user_version"));
  const int latest = schema::LatestVersion(schema::Dialect::kSqlite);
  if (version > latest) {
    return absl::FailedPreconditionError(absl::StrCat("store schema version ", version,
                                                      " is newer than this weftd understands (",
                                                      latest, "); upgrade weftd"));
  }
  if (version == latest) return absl::OkStatus();
  RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  absl::Status s;
  for (int to = static_cast<int>(version) + 1; to <= latest && s.ok(); ++to) {
    s = Exec(schema::Migration(schema::Dialect::kSqlite, to));
  }
  if (s.ok()) s = Exec(absl::StrCat("PRAGMA user_version=", latest));
  if (s.ok()) s = Exec("COMMIT");
  if (!s.ok()) Exec("ROLLBACK").IgnoreError();
  return s;
}

}  // namespace weft
