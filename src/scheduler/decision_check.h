// Checks a policy's decisions against the snapshot they answer, so a policy bug is refused out
// loud (weftd logs it and applies nothing of that round; weft-sim stops with the error) instead
// of over-committing a node or being silently dropped. Used by weftd and weft-sim alike.
#pragma once

#include "absl/status/status.h"
#include "scheduler/cluster.h"

namespace weft::scheduler {

struct DecisionCheckOptions {
  // Whether a preempted job's nodes are free for this round's placements (weft-sim stops it at
  // once); weftd keeps them held until the learners have checkpointed and exited.
  bool preemption_frees_at_once = true;
  // Whether a running job may get a new placement (a resize or move).
  bool allow_resize = true;
};

// OK if every placed or preempted job is one of `snapshot.jobs`, no job is placed twice or both
// placed and preempted, only running jobs are preempted, each placement gives `learners` or a
// count in [min_learners, max_learners], names only known nodes, and after the decisions no node
// a placement adds learners to is allocated beyond its capacity in any resource. FailedPrecondition
// naming the first violation and the job or node otherwise.
absl::Status CheckDecisions(const ClusterSnapshot& snapshot, const Decisions& decisions,
                            const DecisionCheckOptions& options = {});

}  // namespace weft::scheduler
