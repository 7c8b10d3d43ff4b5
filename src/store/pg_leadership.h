// Leader election (store/leadership.h) through a PostgreSQL database: one lease row,
// weft_leader, with the holder, its fencing epoch and its expiry on the server's clock, and the
// members' addresses in weft_members. A campaign is one transaction that locks the lease row,
// so two weftd campaigning at once take turns and at most one holds each epoch.
#pragma once

#include <functional>
#include <memory>

#include "store/leadership.h"
#include "store/pg_database.h"

namespace weft {

class PgLeadership final : public Leadership {
 public:
  explicit PgLeadership(std::shared_ptr<PgDatabase> db);

  absl::StatusOr<Lease> Campaign(const Member& me, int64_t held_epoch, int64_t ttl_ms) override;
  // Installs the database's write check: the lease row's epoch read FOR SHARE, so a takeover
  // waits for the writes that passed the check — for at most `ttl_ms`, the transaction's
  // idle_in_transaction_session_timeout: the server ends the session of a writer stalled
  // longer (a weftd stopped mid-write), which releases its locks.
  void Fence(int64_t epoch, int64_t ttl_ms, std::function<void(int64_t)> on_deposed) override;

 private:
  const std::shared_ptr<PgDatabase> db_;
};

}  // namespace weft
