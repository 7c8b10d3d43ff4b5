// The scheduler's picture of the world: nodes with capacity and allocation, jobs waiting with
// their resource requests, and the decisions a policy returns. Plain data, no I/O: weftd fills a
// ClusterSnapshot from its store, weft-sim from a trace, and both apply the same Decisions.
#pragma once

#include <map>
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
  Resources Times(int n) const;               // n × this
  Resources& operator+=(const Resources& o);
  Resources& operator-=(const Resources& o);
};

// One GPU of a node: its index there (the host's numbering, what nvidia-smi and CUDA on the host
// call it), how a container is given it (a CDI device name, e.g. "nvidia.com/gpu=0"; empty when
// the inventory gave only a count) and what it is (e.g. "NVIDIA A100-SXM4-40GB"; may be empty).
struct GpuDevice {
  int index = 0;
  std::string cdi;
  std::string model;
};

struct Node {
  std::string name;
  Resources capacity;   // capacity.gpus == gpu_devices.size() once the inventory is read
  Resources allocated;  // held by jobs placed on this node
  // Its GPUs, by index ascending; and the indices of those that learners hold now (those of the
  // snapshot's jobs and of learners outside it: a preempted job's, one leaving after a shrink).
  std::vector<GpuDevice> gpu_devices;
  std::vector<int> gpus_held;

  Resources Free() const;
};

// The devices `node` has when the inventory gave only a count: indices 0 … gpus-1, no CDI name.
std::vector<GpuDevice> CountedGpus(int gpus);

class JobModel;

// Where a job stands against its two-tier targets (TRADL; job_spec TargetSpec): it has no deliver
// target, it has one not yet met, or its model was delivered and it trains on to `complete`.
enum class TargetState { kNone, kBeforeDeliver, kDelivered };

// An active job as a policy sees it: what it asks for, what it holds now, and how much service it
// has had. A rigid (gang) job asks for exactly `learners`; an elastic policy may give any count in
// [min_learners, max_learners] (the fair-share policy starts an elastic job, max_learners >
// min_learners, at min_learners and grows it into idle capacity; fifo gives it `learners`).
struct JobRequest {
  std::string job_id;
  std::string tenant;
  TimeMs submitted_ms = 0;
  int learners = 1;  // requested gang size
  int min_learners = 1;
  int max_learners = 1;
  Resources per_learner;
  // The node of each learner it holds now, in rank order; empty while it waits.
  std::vector<std::string> allocation;
  // The GPU indices each of those learners holds on its node (parallel to `allocation`; empty
  // lists for a job without GPUs, or all empty when the caller does not track devices).
  std::vector<std::vector<int>> allocation_gpus;
  // Service attained so far in learner-seconds (GPU-seconds when learners hold one GPU each),
  // the quantity least-attained-service policies order by (Tiresias, NSDI'19).
  double attained_service = 0;
  int restarts = 0;  // restarts caused by reallocation so far
  // Order inside a tenant: higher first (manifest low = -100, normal = 0, high = 100, or a number).
  int priority = 0;
  // Gang placement strategy: false = pack (fewest nodes), true = spread (most nodes).
  bool spread = false;
  // All its learners on one node or none (a parameter-server job: its server is shared memory).
  bool one_node = false;
  // Its targets (the targets policy orders by them; the others ignore them).
  TargetState target = TargetState::kNone;
  // Speed model for policies that size jobs by throughput (Optimus, goodput); null when weft has
  // no model of the job yet. Not owned; valid for the duration of one Schedule() call.
  const JobModel* model = nullptr;

  bool Waiting() const { return allocation.empty(); }
};

// A tenant's share of the cluster: a quota no set of its running jobs may exceed, and a weight for
// weighted fair sharing.
struct TenantShare {
  bool has_quota = false;  // false = limited only by the cluster
  Resources quota;
  double weight = 1;
};

struct ClusterSnapshot {
  TimeMs now_ms = 0;
  // Tenants by name; a job whose tenant is missing here has no quota and weight 1.
  std::map<std::string, TenantShare> tenants;
  // Node capacity, and allocation = the sum of what running jobs hold.
  std::vector<Node> nodes;
  // Every active job, waiting and running, in submission order.
  std::vector<JobRequest> jobs;
  // Whether to fill Decisions::waiting. weftd shows the reasons to people; weft-sim replaying
  // 80k jobs does not need them and turns them off.
  bool explain = true;
  // Whether a preempted job's nodes are free for this round's placements. weft-sim stops it at
  // once; weftd keeps its nodes held until its learners have checkpointed and exited, so a job
  // that needs them is placed in a later round (and resizes are restarts there, scheduler/
  // placement.h PlaceCounts).
  bool preemption_frees_at_once = true;
};

// Give `job_id` the learner nodes `learner_nodes` (learner r on learner_nodes[r]): a start for a
// waiting job, a resize or move for a running one.
struct Placement {
  std::string job_id;
  std::vector<std::string> learner_nodes;
  // Why a running job is resized, for its history ("grow to 3: idle capacity", "shrink to 1:
  // another tenant is below its fair share"); empty for a start (weftd says where it was placed).
  std::string reason;
  // The GPU indices of each learner on its node (parallel to learner_nodes), filled by
  // AssignGpus (scheduler/devices.h) after the policy: policies decide counts, never devices.
  std::vector<std::vector<int>> learner_gpus;
};

// How a waiting reason of `job` names job `other`: by id when both are the same tenant's,
// otherwise "a job of another tenant", so no tenant learns another's job ids from the queue.
std::string NameFor(const JobRequest& job, const JobRequest& other);

// Why a job waits, as a code a program can act on (the API shows its name).
enum class WaitCode {
  kNextRound,       // weftd: not considered yet (it arrived after the last round)
  kRestartBackoff,  // weftd: after a failure, waiting out its backoff before the next attempt
  kCheckpointing,   // weftd: preempted or halted, its learners write a checkpoint before it runs
  kQuota,           // its tenant's quota would be exceeded
  kPriority,        // higher-priority jobs of its tenant wait ahead of it
  kNoRoom,          // no set of nodes has room for its learners now
  kReservation,     // the room it fits in is reserved for an earlier gang that does not fit yet
  kBehindHead,      // FIFO: behind the first job in line, which does not fit
  kOutranked,       // the policy gave the room to jobs it ranks higher
  kPreempting,      // running jobs are being preempted to make room for it
};

// "next_round", "restart_backoff", "checkpointing", "quota", "priority", "no_room",
// "reservation", "behind_head", "outranked", "preempting".
const char* WaitCodeName(WaitCode code);

// Why a queued job was not placed this round: a code, and the reason for people ("waiting: ...").
struct Waiting {
  std::string job_id;
  WaitCode code = WaitCode::kNoRoom;
  std::string reason;
};

// A policy's answer. Jobs in neither `placements` nor `preempted` keep what they hold.
struct Decisions {
  std::vector<Placement> placements;
  std::vector<std::string> preempted;  // running jobs to stop and requeue (all learners)
  // Why, for those of `preempted` a policy explains ("delivered: an undelivered job needs its
  // room"); weftd words the others itself.
  std::map<std::string, std::string> preempt_reasons;
  std::vector<Waiting> waiting;
};

}  // namespace weft::scheduler
