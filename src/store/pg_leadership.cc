// The PostgreSQL store's leader election (store/pg_leadership.h).
#include "store/pg_leadership.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"

namespace weft {
namespace {

// For the rest of the transaction: the server ends the session if it idles (the client
// stalled) for longer than $1 milliseconds in it, rolling it back.
constexpr char kBoundStalls[] =
    "SELECT set_config('idle_in_transaction_session_timeout', $1, true)";

Member ReadMember(const sql::Row& row) { return {row.Text(0), row.Text(1), row.Text(2)}; }

// The lease row as a campaign finds it.
struct LeaseRow {
  std::string holder;
  int64_t epoch = 0;
  bool expired = false;
};

// Who the lease leaves where, after a campaign's update: its expiry, the fresh members, the
// last holder's and the leader's addresses.
absl::Status ReadLeaseIn(sql::Tx& tx, const std::string& holder, Lease* lease) {
  ASSIGN_OR_RETURN(lease->expires_in_ms,
                   tx.Count("read the lease",
                            "SELECT CASE WHEN holder = '' THEN 0 ELSE "
                            "(EXTRACT(EPOCH FROM expires_at - clock_timestamp()) * 1000)::bigint "
                            "END FROM weft_leader WHERE id = 1"));
  ASSIGN_OR_RETURN(lease->members,
                   tx.Query<Member>("read the members",
                                    "SELECT name, api, coordinator FROM weft_members WHERE "
                                    "seen_at > clock_timestamp() - $1 * interval '1 millisecond' "
                                    "ORDER BY name",
                                    ReadMember, Leadership::kMemberFreshMs));
  absl::StatusOr<Member> last = tx.QueryOne<Member>(
      "read the last holder", "no holder",
      "SELECT name, api, coordinator FROM weft_members WHERE name = $1", ReadMember, holder);
  if (last.ok()) lease->last_holder = *last;
  absl::StatusOr<Member> leader = tx.QueryOne<Member>(
      "read the leader", "no leader",
      "SELECT m.name, m.api, m.coordinator FROM weft_leader l JOIN weft_members m ON m.name = "
      "l.holder WHERE l.id = 1 AND l.expires_at > clock_timestamp()",
      ReadMember);
  if (leader.ok()) lease->leader = *leader;
  return absl::OkStatus();
}

}  // namespace

PgLeadership::PgLeadership(std::shared_ptr<PgDatabase> db) : db_(std::move(db)) {}

absl::StatusOr<Lease> PgLeadership::Campaign(const Member& me, int64_t held_epoch, int64_t ttl_ms) {
  if (me.name.empty()) return absl::InvalidArgumentError("a member needs a name");
  return db_->Run(
      "campaign for the leader lease", sql::Mode::kElection,
      [&](sql::Tx& tx) -> absl::StatusOr<Lease> {
        // Stalled past the lease with the lease row locked, this campaign would hold up every
        // other: the server ends it instead.
        RETURN_IF_ERROR(
            tx.Execute("bound the campaign's stalls", kBoundStalls, absl::StrCat(ttl_ms)).status());
        RETURN_IF_ERROR(tx.Execute("record the member",
                                   "INSERT INTO weft_members (name, api, coordinator, seen_at) "
                                   "VALUES ($1, $2, $3, clock_timestamp()) ON CONFLICT (name) DO "
                                   "UPDATE SET api = EXCLUDED.api, coordinator = "
                                   "EXCLUDED.coordinator, seen_at = EXCLUDED.seen_at",
                                   me.name, me.api, me.coordinator)
                            .status());
        ASSIGN_OR_RETURN(LeaseRow row, tx.QueryOne<LeaseRow>(
                                           "lock the lease", "weft_leader has no lease row",
                                           "SELECT holder, epoch, expires_at <= clock_timestamp() "
                                           "FROM weft_leader WHERE id = 1 FOR UPDATE",
                                           [](const sql::Row& r) {
                                             return LeaseRow{r.Text(0), r.Int(1), r.Bool(2)};
                                           }));
        Lease lease;
        lease.epoch = row.epoch;
        const bool renew = held_epoch != 0 && held_epoch == row.epoch && row.holder == me.name;
        // A held_epoch of 0 under our own name is an earlier process of this member: it is gone.
        const bool take =
            held_epoch == 0 && (row.expired || row.holder.empty() || row.holder == me.name);
        if (renew || take) {
          if (take) lease.epoch = row.epoch + 1;
          RETURN_IF_ERROR(tx.Execute("hold the lease",
                                     "UPDATE weft_leader SET holder = $1, epoch = $2, "
                                     "expires_at = clock_timestamp() + $3 * interval "
                                     "'1 millisecond' WHERE id = 1",
                                     me.name, lease.epoch, ttl_ms)
                              .status());
          lease.held = true;
        }
        RETURN_IF_ERROR(ReadLeaseIn(tx, row.holder, &lease));
        return lease;
      });
}

void PgLeadership::Fence(int64_t fenced, int64_t ttl_ms, std::function<void(int64_t)> on_deposed) {
  // on_deposed runs once, on the first write that finds the epoch moved on.
  struct Deposed {
    absl::Mutex mu;
    std::function<void(int64_t)> call ABSL_GUARDED_BY(mu);
  };
  auto deposed = std::make_shared<Deposed>();
  {
    absl::MutexLock lock(&deposed->mu);
    deposed->call = std::move(on_deposed);
  }
  db_->SetWriteCheck([fenced, ttl = absl::StrCat(ttl_ms), deposed](sql::Tx& tx) -> absl::Status {
    // One round trip: the epoch, and the bound on this transaction's stalls (Fence's comment).
    ASSIGN_OR_RETURN(int64_t now,
                     tx.Count("check the fence",
                              "SELECT epoch, set_config('idle_in_transaction_session_timeout', "
                              "$1, true) FROM weft_leader WHERE id = 1 FOR SHARE",
                              ttl));
    if (now == fenced) return absl::OkStatus();
    std::function<void(int64_t)> call;
    {
      absl::MutexLock lock(&deposed->mu);
      call.swap(deposed->call);
    }
    if (call) call(now);
    return absl::FailedPreconditionError(
        absl::StrCat("this weftd no longer leads: the store's leader epoch is ", now,
                     ", this weftd led at epoch ", fenced, "; nothing was written"));
  });
}

}  // namespace weft
