// Tenants' shares of the cluster as weighted Dominant Resource Fairness sees them (Ghodsi et al.,
// "Dominant Resource Fairness: Fair Allocation of Multiple Resource Types", NSDI'11). The one
// place this arithmetic lives: the fair-share policy decides with it and weftd shows it
// (`weft tenant usage`). Pure, no I/O.
#pragma once

#include <map>
#include <string>

#include "scheduler/cluster.h"

namespace weft::scheduler {

struct TenantShares {
  TenantShare share;          // quota and weight (weight 1, no quota when the snapshot has none)
  Resources used;             // held by its running jobs
  int running_jobs = 0;       // jobs holding learners
  int waiting_jobs = 0;       // jobs waiting for learners
  double dominant_share = 0;  // max over resources of used / cluster total, unweighted, in [0, 1]
  // Its weight over the summed weights of the tenants with running or waiting jobs; 0 for a
  // tenant with neither.
  double fair_share = 0;
};

// Every tenant of `snapshot.tenants`, and every tenant that owns a job of `snapshot.jobs`
// without being listed there, with its figures over `snapshot.jobs` and the nodes' capacity.
std::map<std::string, TenantShares> ComputeTenantShares(const ClusterSnapshot& snapshot);

// `used`'s dominant share of `total` divided by `weight` (a weight <= 0 counts as 1): max over
// resources with a positive total of used / total. 0 for nothing used.
double DominantShare(const Resources& used, const Resources& total, double weight);

// The cluster's total capacity.
Resources TotalCapacity(const std::vector<Node>& nodes);

}  // namespace weft::scheduler
