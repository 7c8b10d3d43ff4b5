// The store's schema, once for both databases (internal to store/): every change since the
// first table, in order, in SQL whose types are named by the dialect. Each change belongs to one
// version of the SQLite schema and one of the PostgreSQL schema; the two number their versions
// separately because they were deployed separately (PostgreSQL's version 1 is SQLite's 1 to 9 at
// once, and its version 2, leader election, has no SQLite counterpart). A store migrates forward
// in one transaction on open; SQLite records its version in PRAGMA user_version, PostgreSQL in
// the table weft_schema; a version newer than this weftd knows is refused.
//
// A new column or table is one more change with the next version of each dialect that has it.
#pragma once

#include <string>

namespace weft::schema {

enum class Dialect { kSqlite, kPostgres };

// The newest version of `dialect`'s schema this weftd knows (SQLite 11, PostgreSQL 4).
int LatestVersion(Dialect dialect);

// The SQL script (several statements) that takes a `dialect` store from version `to - 1` to
// `to`, for 1 <= to <= LatestVersion(dialect); "" otherwise.
std::string Migration(Dialect dialect, int to);

// The advisory lock (pg_advisory_xact_lock's key) PostgreSQL migrations hold, so that two weftd
// opening one database at once migrate it once: "weft" in ASCII.
inline constexpr long long kPgMigrationLock = 0x77656674;

}  // namespace weft::schema
