// Scheduling policies: a snapshot in, decisions out. Pure — no clocks, threads or I/O — so the
// same policy object runs inside weftd and inside weft-sim.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "scheduler/cluster.h"

namespace weft::scheduler {

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string Name() const = 0;
  // One scheduling round over `snapshot`. Placements never over-commit any node.
  virtual Decisions Schedule(const ClusterSnapshot& snapshot) = 0;
};

// Whether `request` could ever be placed on `nodes` if they were empty (Ray's INFEASIBLE).
// OK if it can; FailedPrecondition whose message says which resource no node has enough of,
// e.g. "needs 8 cpus per learner, the largest node has 2".
absl::Status CheckFeasible(const JobRequest& request, const std::vector<Node>& nodes);

// Places all of a gang on `nodes` (first fit per learner, allocating as it goes), or none.
// Returns true and fills `placement`, updating the nodes' allocation, when all learners fit.
bool PlaceGang(const JobRequest& request, std::vector<Node>& nodes, Placement* placement);

// First-in first-out with a blocked head: jobs start in submission order, and when the oldest
// waiting job does not fit, nothing behind it starts (no backfill). The baseline every other
// policy is compared to.
class FifoPolicy : public Policy {
 public:
  std::string Name() const override { return "fifo"; }
  Decisions Schedule(const ClusterSnapshot& snapshot) override;
};

}  // namespace weft::scheduler
