#pragma once

#include "scheduler/policy.h"
#include "scheduler/shares.h"

namespace weft::scheduler {

// weft's multi-tenant policy: quotas, weighted Dominant Resource Fairness across tenants,
// priorities inside a tenant, all-or-nothing gangs placed `pack` or `spread`, backfill behind a
// reservation, and preemption.
//
//  - Quotas: a job starts only if its tenant's running jobs plus its gang stay within the
//    tenant's quota in every resource (ClusterSnapshot::tenants).
//  - Fair share: progressive filling by weighted DRF (Ghodsi et al., "Dominant Resource
//    Fairness: Fair Allocation of Multiple Resource Types", NSDI'11) — the next job considered
//    always belongs to the tenant with waiting work whose dominant share (its largest fraction of
//    any cluster resource) divided by its weight is smallest.
//  - Inside a tenant: higher `priority` first, then submission order.
//  - Gangs: all `learners` or none, on the fewest nodes (pack) or the most (spread).
//  - Backfill with a reservation (EASY backfilling, Lifka 1995, without runtime estimates): the
//    first gang that does not fit reserves the nodes it will need once their jobs finish; later
//    jobs may start anywhere else, so small jobs flow without starving the large one.
//  - Preemption: when the first blocked job could start by stopping running jobs that are of
//    lower priority in its own tenant, or that belong to tenants above their fair share while its
//    tenant is below its own, those jobs are preempted (fewest, lowest priority and youngest
//    first) and the blocked job is placed in the next round, once they have checkpointed and
//    released their nodes. At most one such preemption per round.
// Every job left waiting gets a reason ("waiting: tenant quota cpus 4/4", "waiting: no node set
// fits 3 learners × 2 cpus (pack)", "waiting: behind 2 higher-priority jobs").
class FairSharePolicy : public Policy {
 public:
  std::string Name() const override { return "fairshare"; }
  Decisions Schedule(const ClusterSnapshot& snapshot) override;
};

}  // namespace weft::scheduler
