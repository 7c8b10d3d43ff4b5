// The SQL driver on PostgreSQL: a pool of connections, statements prepared once per
// connection, text parameters, and libpqxx's exceptions as Statuses (store/sql.h).
#include "store/pg_database.h"

#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <pqxx/pqxx>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "common/status_macros.h"
#include "common/text.h"
#include "store/commit_metric.h"
#include "store/schema.h"

namespace weft {
namespace pg {
namespace {

// The Status for a libpqxx exception thrown while doing `what` (call inside a catch block):
//   unique_violation -> AlreadyExists; the disk full (SQLSTATE 53100) or out of memory ->
//   ResourceExhausted; the server unreachable, or a commit whose outcome is unknown ->
//   Unavailable; anything else -> Internal with the server's message.
absl::Status Error(const std::string& what) {
  try {
    throw;
  } catch (const pqxx::unique_violation&) {
    return absl::AlreadyExistsError(absl::StrCat(what, ": already exists"));
  } catch (const pqxx::insufficient_resources& e) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the store is full (the PostgreSQL server's disk or memory): ", what, ": ",
                     e.what(), "; nothing of this request was stored"));
  } catch (const pqxx::broken_connection& e) {
    return absl::UnavailableError(
        absl::StrCat("the PostgreSQL store is unreachable: ", what, ": ", e.what()));
  } catch (const pqxx::in_doubt_error& e) {
    return absl::UnavailableError(
        absl::StrCat("the PostgreSQL store lost the connection while ", what,
                     " committed; it may or may not be stored: ", e.what()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("postgresql: ", what, ": ", e.what()));
  }
}

// A parameter as the text PostgreSQL reads it (NULL: none). Text becomes valid UTF-8.
std::optional<std::string> ParamText(const sql::Value& value) {
  return std::visit(
      [](const auto& v) -> std::optional<std::string> {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, sql::Null>) {
          return std::nullopt;
        } else if constexpr (std::is_same_v<T, int64_t>) {
          return std::to_string(v);
        } else if constexpr (std::is_same_v<T, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, double>) {
          if (std::isnan(v)) return "NaN";
          if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
          return absl::StrFormat("%.17g", v);
        } else {
          return ValidUtf8(v);
        }
      },
      value);
}

class ResultRow final : public sql::Row {
 public:
  explicit ResultRow(const pqxx::row& row) : row_(row) {}
  bool IsNull(int col) const override { return row_[col].is_null(); }
  std::string Text(int col) const override {
    const pqxx::field f = row_[col];
    return f.is_null() ? std::string() : std::string(f.c_str(), f.size());
  }
  int64_t Int(int col) const override { return row_[col].is_null() ? 0 : row_[col].as<int64_t>(); }
  double Real(int col) const override { return row_[col].is_null() ? 0 : row_[col].as<double>(); }
  bool Bool(int col) const override { return !row_[col].is_null() && row_[col].as<bool>(); }

 private:
  const pqxx::row& row_;
};

const sql::Dialect& PgDialect() {
  static const sql::Dialect* const kDialect =
      new sql::Dialect{"postgresql", " FOR UPDATE", "strpos", ", leader_epoch",
                       ", (SELECT epoch FROM weft_leader WHERE id = 1)"};
  return *kDialect;
}

}  // namespace

// A connection's prepared statements, named s0, s1, ... in the order first used and prepared
// on the server on first use. Forgotten with the connection.
class Statements {
 public:
  const std::string& Name(pqxx::connection& conn, const std::string& sql) {
    auto it = names_.find(sql);
    if (it != names_.end()) return it->second;
    std::string name = absl::StrCat("s", names_.size());
    conn.prepare(name, sql);
    return names_.emplace(sql, std::move(name)).first->second;
  }

 private:
  std::map<std::string, std::string> names_;
};

namespace {

class Transaction final : public sql::Tx {
 public:
  Transaction(pqxx::transaction_base& tx, pqxx::connection& conn, Statements& stmts)
      : tx_(tx), conn_(conn), stmts_(stmts) {}
  const sql::Dialect& dialect() const override { return PgDialect(); }

  absl::StatusOr<int64_t> Run(const std::string& what, const std::string& sql,
                              const std::vector<sql::Value>& params,
                              absl::FunctionRef<void(const sql::Row&)> row) override {
    std::vector<std::optional<std::string>> text;
    text.reserve(params.size());
    for (const sql::Value& v : params) text.push_back(ParamText(v));
    try {
      const pqxx::result rows =
          tx_.exec_prepared(stmts_.Name(conn_, sql), pqxx::prepare::make_dynamic_params(text));
      for (const pqxx::row& r : rows) row(ResultRow(r));
      return static_cast<int64_t>(rows.affected_rows());
    } catch (const std::exception&) {
      return Error(what);
    }
  }

  // A transaction-scoped advisory lock on (space, hashtext(key)); two-key locks do not meet
  // the one-key one migrations hold.
  absl::Status Lock(int32_t space, const std::string& key) override {
    return Execute(absl::StrCat("lock ", key), "SELECT pg_advisory_xact_lock($1, hashtext($2))",
                   int64_t{space}, key)
        .status();
  }

 private:
  pqxx::transaction_base& tx_;
  pqxx::connection& conn_;
  Statements& stmts_;
};

}  // namespace
}  // namespace pg

struct PgDatabase::Session {
  std::unique_ptr<pqxx::connection> conn;
  pg::Statements stmts;
};

absl::StatusOr<std::unique_ptr<PgDatabase>> PgDatabase::Open(const std::string& uri) {
  std::unique_ptr<PgDatabase> db(new PgDatabase(uri));
  RETURN_IF_ERROR(db->Migrate());
  return db;
}

PgDatabase::PgDatabase(std::string uri) : uri_(std::move(uri)) {}

PgDatabase::~PgDatabase() = default;

const sql::Dialect& PgDatabase::dialect() const { return pg::PgDialect(); }

void PgDatabase::SetWriteCheck(std::function<absl::Status(sql::Tx&)> check) {
  auto shared = std::make_shared<const std::function<absl::Status(sql::Tx&)>>(std::move(check));
  absl::MutexLock lock(&check_mu_);
  write_check_ = std::move(shared);
}

absl::StatusOr<std::unique_ptr<PgDatabase::Session>> PgDatabase::Acquire() {
  {
    absl::MutexLock lock(&mu_);
    while (idle_.empty() && sessions_ >= kMaxSessions) released_.Wait(&mu_);
    if (!idle_.empty()) {
      std::unique_ptr<Session> session = std::move(idle_.back());
      idle_.pop_back();
      return session;
    }
    ++sessions_;  // a new one, connected without holding the lock
  }
  try {
    auto session = std::make_unique<Session>();
    session->conn = std::make_unique<pqxx::connection>(uri_);
    return session;
  } catch (const std::exception& e) {
    {
      absl::MutexLock lock(&mu_);
      --sessions_;
    }
    released_.Signal();
    // libpq's message names the host and the reason, never the password; one line.
    return absl::UnavailableError(
        absl::StrCat("cannot connect to the PostgreSQL store: ",
                     absl::StrReplaceAll(absl::StripTrailingAsciiWhitespace(e.what()),
                                         {{"\n\t", " "}, {"\n", " "}})));
  }
}

void PgDatabase::Release(std::unique_ptr<Session> session) {
  {
    absl::MutexLock lock(&mu_);
    if (session->conn->is_open()) {
      idle_.push_back(std::move(session));
    } else {
      // The server went away (or restarted): the idle connections went with it.
      sessions_ -= 1 + static_cast<int>(idle_.size());
      idle_.clear();
    }
  }
  released_.SignalAll();
}

std::string PgDatabase::Describe() {
  absl::StatusOr<std::unique_ptr<Session>> session = Acquire();
  if (!session.ok()) return "postgresql (not connected)";
  pqxx::connection& c = *(*session)->conn;
  auto text = [](const char* s) { return std::string(s != nullptr ? s : ""); };
  std::string out = absl::StrCat(text(c.username()), "@", text(c.hostname()), ":", text(c.port()),
                                 "/", text(c.dbname()));
  Release(*std::move(session));
  return out;
}

absl::Status PgDatabase::Transact(const std::string& what, sql::Mode mode,
                                  absl::FunctionRef<absl::Status(sql::Tx&)> body) {
  ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Acquire());
  std::shared_ptr<const std::function<absl::Status(sql::Tx&)>> check;
  if (mode == sql::Mode::kWrite) {
    absl::MutexLock lock(&check_mu_);
    check = write_check_;
  }
  pqxx::connection& conn = *session->conn;
  const auto begun = std::chrono::steady_clock::now();
  absl::Status out;
  try {
    auto in = [&](auto& txn) -> absl::Status {
      pg::Transaction tx(txn, conn, session->stmts);
      if (check != nullptr) RETURN_IF_ERROR((*check)(tx));
      RETURN_IF_ERROR(body(tx));
      if (mode == sql::Mode::kWrite || mode == sql::Mode::kElection) {
        txn.commit();
        store_metrics::ObserveCommit(
            "postgresql",
            std::chrono::duration<double>(std::chrono::steady_clock::now() - begun).count());
      }
      return absl::OkStatus();
    };
    if (mode == sql::Mode::kWrite || mode == sql::Mode::kElection) {
      pqxx::work txn(conn);
      out = in(txn);
    } else if (mode == sql::Mode::kSnapshot) {
      pqxx::transaction<pqxx::repeatable_read, pqxx::read_only> txn(conn);
      out = in(txn);
    } else {
      pqxx::nontransaction txn(conn);
      out = in(txn);
    }
  } catch (const std::exception&) {
    out = pg::Error(what);
  }
  Release(std::move(session));
  return out;
}

absl::Status PgDatabase::Migrate() {
  ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Acquire());
  absl::Status out;
  try {
    pqxx::work tx(*session->conn);
    // Serialises weftds migrating one database at once; released at commit.
    tx.exec_params("SELECT pg_advisory_xact_lock($1)", schema::kPgMigrationLock);
    tx.exec("CREATE TABLE IF NOT EXISTS weft_schema (version BIGINT NOT NULL)");
    const pqxx::row max = tx.exec1("SELECT MAX(version) FROM weft_schema");
    const int64_t version = max[0].is_null() ? 0 : max[0].as<int64_t>();
    const int latest = schema::LatestVersion(schema::Dialect::kPostgres);
    if (version > latest) {
      out = absl::FailedPreconditionError(absl::StrCat("store schema version ", version,
                                                       " is newer than this weftd understands (",
                                                       latest, "); upgrade weftd"));
    } else {
      // Migrations are scripts of several statements: run as simple queries, not prepared.
      for (int to = static_cast<int>(version) + 1; to <= latest; ++to) {
        tx.exec(schema::Migration(schema::Dialect::kPostgres, to));
      }
      tx.exec("DELETE FROM weft_schema");
      tx.exec_params("INSERT INTO weft_schema (version) VALUES ($1)", int64_t{latest});
      tx.commit();
    }
  } catch (const std::exception&) {
    out = pg::Error("migrate the schema");
  }
  Release(std::move(session));
  return out;
}

}  // namespace weft
