// The job controller: owns every job's lifecycle inside weftd. It validates and stores
// submissions, runs scheduling rounds (snapshot from the store -> scheduler policy -> placements),
// starts learners through the executor, and turns what learners report (registration, metrics,
// models, exits) into state transitions. Every transition is written to the store before it is
// acted on.
//
// Thread-safety: all public methods may be called from any thread (REST handlers, gRPC handlers,
// the scheduling loop); one mutex serialises the read-modify-write of job records.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "common/clock.h"
#include "executor/executor.h"
#include "job/layout.h"
#include "scheduler/policy.h"
#include "job/job_spec.h"
#include "store/store.h"

namespace weft {

struct ControllerOptions {
  std::string data_dir;                      // jobs live in <data_dir>/jobs/<id>/
  std::vector<scheduler::Node> nodes;        // the cluster's inventory
  std::string coordinator_address;           // host:port learners report to
  int64_t schedule_interval_ms = 200;        // scheduling round period
  int64_t heartbeat_interval_ms = 1000;      // what learners are told to use
  int64_t heartbeat_timeout_ms = 60000;      // a RUNNING learner silent this long is failed
  int64_t start_timeout_ms = 120000;         // STARTING without registering this long is failed
  int64_t stop_grace_ms = 10000;             // SIGTERM -> SIGKILL delay
  int64_t restart_backoff_ms = 1000;         // first restart delay, doubled each restart
  int64_t restart_backoff_max_ms = 60000;
  std::string learner_key;                   // secret behind learner credentials; empty = none
  std::map<std::string, std::vector<int>> node_cpusets;  // node -> CPUs its learners are pinned to
};

// Result of a learner registering.
struct RegisterDecision {
  bool accepted = false;
  std::string reason;
  std::vector<std::string> resume_from;  // committed checkpoints, newest first
};

class Controller {
 public:
  Controller(Store& store, Executor& executor, scheduler::Policy& policy, const Clock& clock,
             ControllerOptions options);
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Brings the store's jobs in line with reality after weftd (re)starts: a job whose learner
  // outlived the previous weftd keeps it (the executor adopts it); a job whose learner is gone
  // is requeued and resumes from its latest checkpoint (attempt fencing keeps stragglers out).
  // Needs the coordinator at the same address as before for adopted learners to reconnect.
  absl::Status Recover();

  // The host:port learners are told to report to; set once the gRPC server is bound, before
  // StartLoop().
  void SetCoordinatorAddress(const std::string& address);

  // Starts / stops the background scheduling loop (one Tick every schedule_interval_ms).
  void StartLoop();
  void StopLoop();

  // Validates, stores and queues a manifest for `tenant`. InvalidArgument with `errors` filled
  // (field, problem) for a bad manifest or a request that can never fit; nothing is stored then.
  absl::StatusOr<JobRecord> Submit(const std::string& manifest, const std::string& tenant,
                                   std::vector<FieldError>* errors);

  // Checkpoint-less halt for now: stops the learners and records HALTED.
  // NotFound for an unknown job; FailedPrecondition if the job already ended or is halted.
  absl::Status Halt(const std::string& id);

  // Puts a HALTED job back in the queue (RESUMING -> QUEUED). It restarts from the beginning
  // until checkpoints exist. NotFound; FailedPrecondition unless HALTED.
  absl::Status Resume(const std::string& id);

  // Stops the job's learners and removes the job, its history, metrics, models and files.
  // NotFound for an unknown job.
  absl::Status Delete(const std::string& id);

  // One control round: reap learner exits, time out silent learners, schedule, start learners.
  void Tick();

  // Why a queued job is still waiting ("waiting: ..."), empty if it is not waiting.
  std::string WaitingReason(const std::string& id) const;

  // The queue: QUEUED and PREEMPTED jobs of `tenant` (all when empty), higher priority first,
  // then oldest, each with why it waits.
  struct QueueEntry {
    JobRecord job;
    int priority = 0;
    std::string reason;
  };
  absl::StatusOr<std::vector<QueueEntry>> Queue(const std::string& tenant) const;

  // Each node's capacity and allocation, with the jobs holding it.
  struct NodeUsage {
    scheduler::Node node;
    std::vector<JobRecord> jobs;
  };
  absl::StatusOr<std::vector<NodeUsage>> Nodes() const;

  // Each tenant's resources in use, its weighted dominant share and its fair share (weight over
  // the weights of the tenants with active or queued jobs; 0 for a tenant without).
  struct TenantUsage {
    TenantRecord tenant;
    scheduler::Resources used;
    int running_jobs = 0;
    int queued_jobs = 0;
    double dominant_share = 0;  // max over resources of used / cluster total
    double fair_share = 0;
  };
  absl::StatusOr<std::vector<TenantUsage>> Usage() const;

  // Where a job's files live (job/layout.h), and the job's directory and log directory.
  const JobLayout& layout() const { return layout_; }
  std::string JobDir(const std::string& id) const;
  std::string LogDir(const std::string& id) const;

  // The credential a learner of job `id` presents to the coordination service:
  // HMAC-SHA256(options.learner_key, id), so weftd can hand it out again after a restart without
  // storing it. Works for that job only; learners never see tenant or admin tokens.
  std::string LearnerCredential(const std::string& id) const;
  // Whether `credential` is job `id`'s. Always true when no learner_key is configured (tests).
  bool CheckLearnerCredential(const std::string& id, const std::string& credential) const;

  // --- Coordination service (called by gRPC handlers) ---
  // The job moves STARTING -> RUNNING once all of its learners have registered.
  RegisterDecision OnRegister(const std::string& id, int rank, int64_t attempt, int64_t pid);
  // Returns whether the learner should keep running. Every rank heartbeats (each is checked for
  // silence); only rank 0's progress and metrics are the job's.
  bool OnHeartbeat(const std::string& id, int rank, int64_t attempt, const JobProgress& progress);
  bool OnMetrics(const std::string& id, int rank, int64_t attempt,
                 const std::vector<MetricRecord>& points, const JobProgress& progress);
  // FailedPrecondition if the attempt is stale or the job is not running; InvalidArgument if the
  // model file is missing or its size differs from `artifact.bytes`.
  absl::Status OnCommitArtifact(const std::string& id, int64_t attempt,
                                const ArtifactRecord& artifact);
  // A learner's own account of how it ended; rank 0's success is the job's.
  void OnFinished(const std::string& id, int rank, int64_t attempt, bool succeeded,
                  const std::string& reason);
  // Records a durable checkpoint and deletes those beyond the spec's checkpoint.keep. Accepted
  // from the current attempt while the job runs or was just halted (a halted learner writes one
  // last checkpoint). FailedPrecondition for a stale attempt; InvalidArgument if the file is
  // missing, outside the job's directory or not `checkpoint.bytes` long.
  absl::Status OnCommitCheckpoint(const std::string& id, int64_t attempt,
                                  const CheckpointRecord& checkpoint);

 private:
  struct Finish {
    bool succeeded = false;
    std::string reason;
  };
  // Why a gang's learner failed, kept while the rest of the gang checkpoints and stops.
  struct Failure {
    std::string reason;
    bool user_error = false;  // fail the job instead of restarting it
  };

  absl::Status TransitionLocked(JobRecord& record, JobState to, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Job is active and `attempt` is its current attempt.
  absl::StatusOr<JobRecord> CurrentAttemptLocked(const std::string& id, int64_t attempt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One learner ended. Rank 0's clean exit after a success completes the job; another rank's
  // clean exit waits for rank 0; any failure stops the rest of the gang and restarts the job.
  // A preempted job goes back to the queue once its last learner is gone.
  void HandleExitLocked(const LearnerExit& exit) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets the in-memory state of a job's current attempt (registrations, liveness, finish).
  void ForgetAttemptLocked(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fails active jobs whose learner has been silent too long; marks them FAILED in `jobs` too.
  void CheckLivenessLocked(std::vector<JobRecord>& jobs) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One scheduling round over `jobs` (the store's jobs as of this round).
  void ScheduleLocked(const std::vector<JobRecord>& jobs) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // RUNNING -> PREEMPTED and SIGTERM to its learner, which checkpoints and exits; its exit moves
  // the job back to QUEUED (HandleExitLocked). It keeps its node until then.
  void PreemptLocked(JobRecord r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartJobLocked(JobRecord record, const scheduler::Placement& placement)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FailLocked(JobRecord& record, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After a retryable failure: requeues the job (resuming from its latest checkpoint) with
  // exponential backoff while restarts < max_restarts, otherwise fails it with `reason`.
  void RestartOrFailLocked(JobRecord& record, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string LastLogLine(const std::string& id, int rank) const;
  // What the executor needs to run (or adopt) learner `rank` of the current attempt of `record`;
  // `rendezvous` is where rank 0 serves the gang's store (unused for one learner).
  LearnerLaunch LaunchFor(const JobRecord& record, const JobSpec& spec, int rank,
                          const std::pair<std::string, int>& rendezvous = {}) const;

  Store& store_;
  Executor& executor_;
  scheduler::Policy& policy_;
  const Clock& clock_;
  ControllerOptions options_;  // coordinator_address is written once before the loop starts
  const JobLayout layout_;

  mutable std::mutex mu_;
  std::map<std::string, std::string> waiting_ ABSL_GUARDED_BY(mu_);
  // Per job, per rank, of the current attempt.
  std::map<std::string, std::map<int, Finish>> finished_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::map<int, TimeMs>> last_seen_ms_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::set<int>> registered_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Failure> failing_ ABSL_GUARDED_BY(mu_);  // by job, current attempt
  std::map<std::string, TimeMs> not_before_ms_ ABSL_GUARDED_BY(mu_);  // restart backoff

  std::mutex loop_mu_;
  std::condition_variable loop_cv_;
  bool loop_stop_ ABSL_GUARDED_BY(loop_mu_) = false;
  std::thread loop_;
};

}  // namespace weft
