#include "store/pg_store.h"

#include "store/pg_database.h"
#include "store/pg_leadership.h"

namespace weft {

absl::StatusOr<std::unique_ptr<PgStore>> PgStore::Open(const std::string& uri) {
  absl::StatusOr<std::unique_ptr<PgDatabase>> db = PgDatabase::Open(uri);
  if (!db.ok()) return db.status();
  return std::unique_ptr<PgStore>(new PgStore(std::shared_ptr<PgDatabase>(*std::move(db))));
}

PgStore::PgStore(std::shared_ptr<PgDatabase> db)
    : SqlStore(db, /*cache_tokens=*/false),
      db_(db),
      leadership_(std::make_unique<PgLeadership>(db)) {}

PgStore::~PgStore() = default;

std::string PgStore::Describe() { return db_->Describe(); }

}  // namespace weft
