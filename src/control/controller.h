// The job controller: the lifecycle of every job inside weftd. It validates and stores
// submissions, runs scheduling rounds (the store's jobs -> the cluster view's snapshot -> the
// policy -> checked decisions), starts and stops learners through the executor, and turns what
// learners report and how they exit into state transitions. Every transition is written to the
// store before it is acted on.
//
// Its parts have their own homes: the typed specs (spec_cache.h), the per-attempt state
// (attempt_tracker.h), the cluster view with the queue, nodes and tenant shares
// (cluster_view.h), the learners' credentials (learner_credentials.h), what a submission must
// pass and the files it starts with (admission.h), what learners start with (launches.h), how a
// transition and each event are stored and told (job_recorder.h) and the job's file layout
// (job/layout.h). The controller's own files: controller.cc (submission,
// user actions, the loop), controller_schedule.cc (rounds, starts, preemption),
// controller_exits.cc (exits, liveness, restarts), controller_recovery.cc (after a
// weftd restart), controller_learners.cc (what learners report). Elastic jobs' in-place
// membership changes are ElasticMembership's (elastic_membership.h).
//
// Thread-safety: all public methods may be called from any thread (REST handlers, gRPC handlers,
// the scheduling loop); one mutex serialises the read-modify-write of job records. Nothing
// sleeps while holding it.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/env.h"
#include "common/metrics.h"
#include "control/admission.h"
#include "control/artifacts.h"
#include "control/attempt_tracker.h"
#include "control/cluster_view.h"
#include "control/controller_options.h"
#include "control/datasets.h"
#include "control/disk_quota.h"
#include "control/elastic_membership.h"
#include "control/event_hub.h"
#include "control/job_recorder.h"
#include "control/launches.h"
#include "control/learner_credentials.h"
#include "control/learner_events.h"
#include "control/spec_cache.h"
#include "executor/executor.h"
#include "job/job_spec.h"
#include "job/layout.h"
#include "scheduler/policy.h"
#include "store/store.h"

namespace weft {

class Controller : public LearnerEvents {
 public:
  // `env` is where job files are written and removed (specs, checkpoint pruning, deletion).
  Controller(Store& store, Executor& executor, scheduler::Policy& policy, const Clock& clock,
             ControllerOptions options, Env& env = Env::Default());
  ~Controller() override;
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Brings the store's jobs in line with reality after weftd (re)starts and parses every job's
  // spec once: a job whose learners outlived the previous weftd keeps them (the executor adopts
  // the whole gang or none); a job whose learners are gone is requeued and resumes from its
  // latest checkpoint (attempt fencing keeps stragglers out). Needs the coordinator at the same
  // address as before for adopted learners to reconnect. Errors from the store.
  absl::Status Recover();

  // What learners are told to report to (WEFT_COORDINATOR): host:port, or several
  // comma-separated, the leader's first (active/standby). Set once the gRPC server is bound,
  // before StartLoop(); a leader updates it as members come and go. Learners already running
  // get the new list in their coordinator's answers.
  void SetCoordinatorAddress(const std::string& address);

  // Starts / stops the background scheduling loop (one Tick every schedule_interval_ms).
  void StartLoop();
  void StopLoop();

  // Validates, stores and queues a manifest for `tenant`. InvalidArgument with `errors` filled
  // (field, problem) for a bad manifest, a data set or artifact the tenant has not got (404 and
  // refused look the same), a data.path (no longer accepted) or a request that can never fit;
  // ResourceExhausted at its disk quota; FailedPrecondition at its job limits
  // (tenant_max_jobs, tenant_max_active_jobs); Unavailable if learners cannot run; nothing is
  // stored.
  absl::StatusOr<JobRecord> Submit(const std::string& manifest, const std::string& tenant,
                                   std::vector<FieldError>* errors);

  // Stops the learners (SIGTERM with the stop grace: each writes a last checkpoint) and records
  // HALTED. NotFound for an unknown job; FailedPrecondition if it is already settled, or
  // preempted or resuming (halt it once it is QUEUED).
  absl::Status Halt(const std::string& id);

  // Puts a HALTED job back in the queue (RESUMING -> QUEUED); it continues from its latest
  // checkpoint. NotFound; FailedPrecondition unless HALTED; ResourceExhausted, Unavailable: Submit.
  absl::Status Resume(const std::string& id);

  // Kills the job's learners and removes the job, its history, metrics, models and files.
  // Waits (without the lock, at most 2 s) for the learners to die before removing their files.
  // NotFound for an unknown job.
  absl::Status Delete(const std::string& id);

  // Measures the disk use of every tenant with active jobs and halts the active jobs of those
  // over their quota, each with a reason naming the usage and the quota (control/disk_quota.h).
  // The loop runs it every disk_check_interval_ms, outside the round; nothing without a quota.
  void EnforceDiskQuotas();
  DiskQuota* disk_quota() const { return options_.disk_quota; }

  // One control round: reap learner exits, time out silent learners, schedule, start learners.
  void Tick();

  // The typed spec of `job` (parsed once; SpecCache::Get).
  absl::StatusOr<SpecCache::SpecPtr> Spec(const JobRecord& job) { return specs_.Get(job); }
  // The queue, nodes, tenant shares and why jobs wait.
  ClusterView& view() { return view_; }
  // Where a job's files live.
  const JobLayout& layout() const { return layout_; }
  // The live feed of what happens to jobs (control/event_hub.h).
  const EventHub& events() const { return events_; }
  // Job `id` as the store holds it, with the sequence number of the newest event it already
  // reflects: a reader of events() that starts after that number misses nothing and sees
  // nothing twice. NotFound for an unknown job; errors from the store.
  absl::StatusOr<std::pair<Store::JobSnapshot, int64_t>> SnapshotForEvents(const std::string& id,
                                                                           int64_t metrics_limit);
  // The credentials learners present to the coordination service.
  const LearnerCredentials& credentials() const { return credentials_; }
  // The container images command jobs name (null: none).
  Images* images() const { return options_.images; }
  // Where learners run (its runtime: Executor::Runtime, Available).
  const Executor& executor() const { return executor_; }

  // --- LearnerEvents (control/learner_events.h), called by the coordination service ---
  RegisterDecision OnRegister(const std::string& id, int rank, int64_t attempt, int64_t pid,
                              int world_size) override;
  ReportAnswer OnHeartbeat(const std::string& id, int rank, int64_t attempt,
                           const JobProgress& progress) override;
  ReportAnswer OnMetrics(const std::string& id, int rank, int64_t attempt,
                         const std::vector<MetricRecord>& points,
                         const JobProgress& progress) override;
  absl::Status OnCommitModel(const std::string& id, int64_t attempt,
                             const ModelRecord& model) override;
  absl::Status OnCommitCheckpoint(const std::string& id, int64_t attempt,
                                  const CheckpointRecord& checkpoint) override;
  absl::Status OnFinished(const std::string& id, int rank, int64_t attempt, bool succeeded,
                          const std::string& reason) override;
  absl::StatusOr<RegroupDecision> OnRegroup(const std::string& id, int learner_id, int64_t attempt,
                                            int64_t generation) override;
  int64_t Generation(const std::string& id) override;
  bool NewcomersStarting(const std::string& id) override;

 private:
  // --- controller.cc ---
  // Halt of job `id` with `reason` in its history.
  absl::Status HaltLocked(const std::string& id, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The job's world size: its spec's resources.learners (1 if the spec cannot be read).
  int WorldSize(const JobRecord& record);

  // --- controller_schedule.cc ---
  // One scheduling round over `jobs` (the store's jobs as of this round).
  void ScheduleLocked(const std::vector<JobRecord>& jobs) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // RUNNING -> PREEMPTED (`reason` in its history) and SIGTERM to its learners, which checkpoint
  // and exit; the last exit moves the job back to QUEUED (controller_exits.cc). It keeps its
  // nodes until then.
  void PreemptLocked(JobRecord r, const std::string& reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Applies a resize of a running job as a restart from the checkpoint its learners write when
  // stopped (it comes back with what fits then): a shrink at once, a grow once the job is
  // RUNNING (a starting gang cannot checkpoint yet).
  void ResizeLocked(const JobRecord& r, const scheduler::Placement& p)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartJobLocked(JobRecord record, const scheduler::Placement& placement)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Where the gang's rank 0 serves its rendezvous (a gang of more than one learner) and where each
  // parameter server listens (record.servers' addresses). Unavailable when a port cannot be had.
  absl::Status PickAddressesLocked(JobRecord& record, std::pair<std::string, int>* rendezvous)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts record.servers (their addresses chosen already) before the learners, who are told
  // them. Returns why not; the caller stops the gang.
  absl::Status StartServersLocked(JobRecord& record, const JobSpec& spec, const DatasetRecord& data)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes the files in the job's checkpoint directory that the store does not hold: what a
  // learner killed between writing a checkpoint and committing it left behind (a temporary file,
  // or a whole checkpoint never registered). Called only while none of the job's learners runs.
  void RemoveUncommittedCheckpointsLocked(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- controller_exits.cc ---
  // One learner ended. Rank 0's clean exit after a success completes the job; another rank's
  // clean exit waits for rank 0; any failure stops the rest of the gang and restarts the job.
  // A preempted job goes back to the queue once its last learner is gone.
  void HandleExitLocked(const LearnerExit& exit) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandlePreemptedExitLocked(JobRecord& r, const LearnerExit& e)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleFailingGangExitLocked(JobRecord& r, const LearnerExit& e)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CompleteLocked(JobRecord& r, const std::string& reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The learners of the current attempt are all gone: forget the attempt, then fail the job
  // (`fail_job`) or restart it.
  void EndAttemptLocked(JobRecord& r, const std::string& reason, bool fail_job)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After a retryable failure: requeues the job (resuming from its latest checkpoint) with
  // exponential backoff while restarts < max_restarts, otherwise fails it with `reason`.
  void RestartOrFailLocked(JobRecord& record, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stops the learners of jobs that have been silent too long and restarts those jobs; marks
  // them in `jobs` too.
  void CheckLivenessLocked(std::vector<JobRecord>& jobs) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- controller_recovery.cc ---
  // Adopts the whole gang of `r` or none; true if adopted. An elastic job that can change in
  // place (ElasticMembership::InPlace) is adopted without the learners that died while no weftd
  // watched, as a new generation of the survivors, if at least its minimum survive.
  bool AdoptGangLocked(JobRecord& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool AdoptSurvivorsLocked(JobRecord& r, const JobSpec& spec) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes what deletes could not of the files of jobs the store no longer has
  // (JobLayout::DeletedDir), at start.
  void RemoveDeletedJobsFilesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // For a RUNNING or DELIVERED job whose learners are gone: true, with the completion's reason in
  // *reason, when its final model is committed, i.e. training had ended and only the previous
  // weftd's reaping of the exits (which held rank 0's ReportFinished in memory) was lost.
  bool FinishedUnseenLocked(const JobRecord& r, std::string* reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Store& store_;
  Executor& executor_;
  scheduler::Policy& policy_;
  const Clock& clock_;
  Env& env_;
  const ControllerOptions options_;
  const JobLayout layout_;
  const LearnerCredentials credentials_;
  SpecCache specs_;
  JobModels models_;
  EventHub events_;
  JobRecorder recorder_;
  ClusterView view_;
  Admission admission_;
  Launches launches_;
  ElasticMembership membership_;

  absl::Mutex mu_;
  AttemptTracker attempts_ ABSL_GUARDED_BY(mu_);
  // Learner exits reaped while the store could not be read, settled by a later round.
  std::vector<LearnerExit> unsettled_exits_ ABSL_GUARDED_BY(mu_);
  // The last round could not list the active jobs (logged once per outage).
  bool store_unreachable_ ABSL_GUARDED_BY(mu_) = false;
  std::string last_refusal_ ABSL_GUARDED_BY(mu_);  // the policy's latest refused round

  absl::Mutex loop_mu_;
  bool loop_stop_ ABSL_GUARDED_BY(loop_mu_) = false;
  bool loop_wake_ ABSL_GUARDED_BY(loop_mu_) = false;  // a round is wanted before the period ends
  bool LoopWokenLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_mu_) {
    return loop_stop_ || loop_wake_;
  }
  // Asks the loop for a round now rather than at the end of its period (a learner waits on it).
  void WakeLoop() ABSL_LOCKS_EXCLUDED(loop_mu_, mu_);
  std::thread loop_;
};

}  // namespace weft
