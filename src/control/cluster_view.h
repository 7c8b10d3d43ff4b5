// weftd's picture of the cluster, for the scheduler and for people. It turns the store's jobs
// into the scheduler's snapshot (nodes with what each job holds, tenants' quotas and weights, the
// jobs a round decides about), keeps why each queued job waits after the latest round, and
// answers the queue, node and tenant-share views (the shares come from scheduler/shares.h).
//
// Thread-safety: safe to call from any thread. The waiting reasons have their own lock, so REST
// reads never wait for a scheduling round.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "control/job_models.h"
#include "control/spec_cache.h"
#include "job/job.h"
#include "scheduler/cluster.h"
#include "scheduler/shares.h"
#include "store/store.h"

namespace weft {

class ClusterView {
 public:
  ClusterView(Store& store, SpecCache& specs, JobModels& models,
              std::vector<scheduler::Node> nodes);

  const std::vector<scheduler::Node>& nodes() const { return nodes_; }

  // One scheduling round's input, from the store's `jobs`: queued jobs and jobs that hold
  // learners, in submission order. A queued job whose `not_before[id]` (unix ms) is after `now`
  // sits the round out (restart backoff) and is listed in `held` with its reason; so does a
  // queued job with `stopping[id]` learners of an earlier attempt still running (halted, then
  // resumed at once: they are writing their last checkpoint, and a new attempt beside them would
  // train from an older one). A preempted job still holds its nodes until its learners exit, but
  // is not the policy's to decide about.
  // Each of the snapshot's jobs carries its target state and a pointer to its live model in
  // `models` (valid while the Round lives).
  struct Round {
    scheduler::ClusterSnapshot snapshot;
    std::map<std::string, JobRecord> jobs;           // the snapshot's jobs, by id
    std::map<std::string, scheduler::Waiting> held;  // sitting this round out
    std::map<std::string, scheduler::LiveJobModel> models;
  };
  Round ForRound(const std::vector<JobRecord>& jobs,
                 const std::map<std::string, TimeMs>& not_before,
                 const std::map<std::string, int>& stopping, TimeMs now);

  // The learners a shrink told to leave, by job id: their nodes and devices are counted as held
  // until they exit; the controller sets it before each round.
  void SetLeaving(std::map<std::string, std::vector<LearnerSlot>> leaving);

  // Why each queued job waits, as of the latest round.
  void SetWaiting(std::map<std::string, scheduler::Waiting> waiting);
  // How long the control rounds take (reap, liveness, scheduling, starts), for GET /v1/queue.
  struct RoundTime {
    double last_ms = 0;       // the latest round, milliseconds
    double max_ms = 0;        // the longest since weftd started
    int64_t active_jobs = 0;  // jobs the latest round read (queued or holding learners)
    int64_t rounds = 0;
  };
  void RecordRound(double ms, int64_t active_jobs);
  RoundTime LastRound() const;

  // Why `id` waits; nullopt if it did not wait in the latest round.
  std::optional<scheduler::Waiting> WaitingFor(const std::string& id) const;
  void Forget(const std::string& id);

  // The queue: QUEUED and PREEMPTED jobs of `tenant` (all when empty), higher priority first,
  // then oldest, each with why it waits. Errors from the store.
  struct QueueEntry {
    JobRecord job;
    int priority = 0;
    scheduler::Waiting waiting;
    // Its next target and the estimated seconds of training to it at its requested learners
    // (scheduler::LiveJobModel::NextTarget); target nullptr when it has no target left.
    scheduler::LiveJobModel::Estimate estimate;
  };
  absl::StatusOr<std::vector<QueueEntry>> Queue(const std::string& tenant);

  // Each node's capacity and allocation, with the jobs holding it (a preempted job holds its
  // nodes until its learners exit). Errors from the store.
  struct NodeUsage {
    scheduler::Node node;
    std::vector<JobRecord> jobs;
  };
  absl::StatusOr<std::vector<NodeUsage>> Nodes();

  // Every tenant in the store with its shares: resources in use, running and queued jobs
  // (preempted ones count as queued), dominant share and fair share; and the GPU-milliseconds
  // its jobs' learners have held up to `now_ms` (unix ms), deleted jobs' included. Errors from
  // the store.
  struct TenantUsage {
    TenantRecord tenant;
    scheduler::TenantShares shares;
    int64_t gpu_ms = 0;
  };
  absl::StatusOr<std::vector<TenantUsage>> Usage(TimeMs now_ms);

 private:
  // What the scheduler sees of one job at `now` (unix ms): its gang and shape from `spec`, the
  // nodes its learners hold while it holds resources (empty while it waits), and the service it
  // has attained (learner-seconds over every attempt, JobRecord::LearnerMs).
  scheduler::JobRequest Request(const JobRecord& job, const JobSpec& spec, TimeMs now) const;
  // The nodes with what `jobs` hold (their learners' nodes × per-learner resources).
  std::vector<scheduler::Node> Allocated(const std::vector<JobRecord>& jobs);
  std::map<std::string, scheduler::TenantShare> Tenants();

  Store& store_;
  SpecCache& specs_;
  JobModels& models_;
  const std::vector<scheduler::Node> nodes_;

  mutable absl::Mutex mu_;
  std::map<std::string, scheduler::Waiting> waiting_ ABSL_GUARDED_BY(mu_);
  RoundTime round_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::vector<LearnerSlot>> leaving_ ABSL_GUARDED_BY(mu_);
};

}  // namespace weft
