// The PostgreSQL store's leader election (store/leadership.h): one lease row, weft_leader, with
// the holder, its fencing epoch and its expiry on the server's clock, and the members'
// addresses in weft_members. A campaign is one transaction that locks the lease row, so two
// weftd campaigning at once take turns and at most one holds each epoch.
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "store/pg_store.h"
#include "store/pg_store_run.h"

namespace weft {
namespace {

Member ReadMember(const pqxx::row& row) {
  return {pg::Str(row[0]), pg::Str(row[1]), pg::Str(row[2])};
}

}  // namespace

absl::StatusOr<Lease> PgStore::Campaign(const Member& me, int64_t held_epoch, int64_t ttl_ms) {
  if (me.name.empty()) return absl::InvalidArgumentError("a member needs a name");
  return Run("campaign for the leader lease", Mode::kElection, [&](pg::Tx& tx) {
    tx.Exec(
        "INSERT INTO weft_members (name, api, coordinator, seen_at) "
        "VALUES ($1, $2, $3, clock_timestamp()) ON CONFLICT (name) DO UPDATE SET "
        "api = EXCLUDED.api, coordinator = EXCLUDED.coordinator, seen_at = EXCLUDED.seen_at",
        me.name, me.api, me.coordinator);
    pqxx::result row = tx.Exec(
        "SELECT holder, epoch, expires_at <= clock_timestamp() FROM weft_leader WHERE id = 1 "
        "FOR UPDATE");
    if (row.empty()) throw std::runtime_error("weft_leader has no lease row");
    const std::string holder = pg::Str(row[0][0]);
    const int64_t epoch = row[0][1].as<int64_t>();
    const bool expired = row[0][2].as<bool>();
    Lease lease;
    lease.epoch = epoch;
    const bool renew = held_epoch != 0 && held_epoch == epoch && holder == me.name;
    // A held_epoch of 0 under our own name is an earlier process of this member: it is gone.
    const bool take = held_epoch == 0 && (expired || holder.empty() || holder == me.name);
    if (renew || take) {
      if (take) lease.epoch = epoch + 1;
      tx.Exec(
          "UPDATE weft_leader SET holder = $1, epoch = $2, "
          "expires_at = clock_timestamp() + $3 * interval '1 millisecond' WHERE id = 1",
          me.name, lease.epoch, ttl_ms);
      lease.held = true;
    }
    lease.expires_in_ms = tx.Count(
        "SELECT CASE WHEN holder = '' THEN 0 ELSE "
        "(EXTRACT(EPOCH FROM expires_at - clock_timestamp()) * 1000)::bigint END "
        "FROM weft_leader WHERE id = 1");
    lease.members = tx.Query<Member>(
        "SELECT name, api, coordinator FROM weft_members "
        "WHERE seen_at > clock_timestamp() - $1 * interval '1 millisecond' ORDER BY name",
        ReadMember, kMemberFreshMs);
    auto last = tx.QueryOne<Member>(
        "no holder", "SELECT name, api, coordinator FROM weft_members WHERE name = $1", ReadMember,
        holder);
    if (last.ok()) lease.last_holder = *last;
    auto leader = tx.QueryOne<Member>(
        "no leader",
        "SELECT m.name, m.api, m.coordinator FROM weft_leader l "
        "JOIN weft_members m ON m.name = l.holder WHERE l.id = 1 AND l.expires_at > "
        "clock_timestamp()",
        ReadMember);
    if (leader.ok()) lease.leader = *leader;
    return absl::StatusOr<Lease>(lease);
  });
}

void PgStore::Fence(int64_t epoch, std::function<void(int64_t)> on_deposed) {
  absl::MutexLock lock(&fence_mu_);
  on_deposed_ = std::move(on_deposed);
  fence_epoch_ = epoch;
}

absl::Status PgStore::CheckFence(pg::Tx& tx) {
  const int64_t fenced = fence_epoch_.load();
  if (fenced == 0) return absl::OkStatus();
  const int64_t now = tx.Count("SELECT epoch FROM weft_leader WHERE id = 1 FOR SHARE");
  if (now == fenced) return absl::OkStatus();
  std::function<void(int64_t)> deposed;
  {
    absl::MutexLock lock(&fence_mu_);
    deposed.swap(on_deposed_);
  }
  if (deposed) deposed(now);
  return absl::FailedPreconditionError(
      absl::StrCat("this weftd no longer leads: the store's leader epoch is ", now,
                   ", this weftd led at epoch ", fenced, "; nothing was written"));
}

}  // namespace weft
