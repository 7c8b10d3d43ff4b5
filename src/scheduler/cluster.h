// The scheduler's picture of the world: nodes with capacity and allocation, jobs waiting with
// their resource requests, and the decisions a policy returns. Plain data, no I/O: weftd fills a
// ClusterSnapshot from its store, weft-sim from a trace, and both apply the same Decisions.
#pragma once

#include <string>
#include <vector>

#include "common/clock.h"

namespace weft::scheduler {

// An amount of each schedulable resource.
struct Resources {
  double cpus = 0;        // cores (fractional allowed)
  int64_t memory_mb = 0;  // MiB
  int gpus = 0;

  bool Fits(const Resources& request) const;  // request <= *this in every resource
  Resources& operator+=(const Resources& o);
  Resources& operator-=(const Resources& o);
};

struct Node {
  std::string name;
  Resources capacity;
  Resources allocated;  // held by jobs placed on this node

  Resources Free() const;
};

// What a job asks for: a gang of `learners` processes, each needing `per_learner`.
struct JobRequest {
  std::string job_id;
  std::string tenant;
  TimeMs submitted_ms = 0;
  int learners = 1;
  Resources per_learner;
};

struct ClusterSnapshot {
  TimeMs now_ms = 0;
  std::vector<Node> nodes;
  std::vector<JobRequest> queued;  // in submission order
};

// Start `job_id` with learner r on node learner_nodes[r].
struct Placement {
  std::string job_id;
  std::vector<std::string> learner_nodes;
};

// Why a queued job was not placed this round, for people: "waiting: ...".
struct Waiting {
  std::string job_id;
  std::string reason;
};

struct Decisions {
  std::vector<Placement> placements;
  std::vector<Waiting> waiting;
};

}  // namespace weft::scheduler
