// The job controller: the lifecycle of every job inside weftd. It validates and stores
// submissions, runs scheduling rounds (the store's jobs -> the cluster view's snapshot -> the
// policy -> checked decisions), starts and stops learners through the executor, and turns what
// learners report and how they exit into state transitions. Every transition is written to the
// store before it is acted on.
//
// It composes parts, each with one job: the typed specs (spec_cache.h); the per-attempt state
// (attempt_tracker.h); the cluster view with the queue, nodes and tenant shares
// (cluster_view.h); the learners' credentials (learner_credentials.h); what a submission must
// pass and the files it starts with (admission.h); what learners start with (launches.h); how a
// transition and each event are stored and told (job_recorder.h); a round's decisions applied
// (scheduling_round.h) and an attempt started (attempt_starter.h); elastic jobs' in-place
// membership changes (elastic_membership.h); how exits and silences end an attempt
// (learner_exits.h); and, after a weftd restart, recovery (recovery.h). Its own files:
// controller.cc (submission and the user's actions), controller_loop.cc (the loop) and
// controller_learners.cc (what learners report, the LearnerEvents the coordinator calls).
//
// Thread-safety: all public methods may be called from any thread (REST handlers, gRPC handlers,
// the scheduling loop); one mutex serialises the read-modify-write of job records and guards
// the attempts, which the parts that need them get as arguments under it. Nothing sleeps while
// holding it, and a round's policy runs without it (scheduling_round.h): a learner's report is
// answered while a round decides. A second mutex serialises the rounds themselves.
#pragma once

#include <map>
#include <memory>
#include <optional>
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
#include "control/attempt_starter.h"
#include "control/attempt_tracker.h"
#include "control/cluster_view.h"
#include "control/control_loop.h"
#include "control/controller_options.h"
#include "control/datasets.h"
#include "control/disk_quota.h"
#include "control/elastic_membership.h"
#include "control/event_hub.h"
#include "control/job_recorder.h"
#include "control/launches.h"
#include "control/learner_credentials.h"
#include "control/learner_events.h"
#include "control/learner_exits.h"
#include "control/scheduling_round.h"
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
  //
  // With `trial`, the job is trial `trial->number` of experiment `*trial->experiment`: it is
  // stored with the experiment's new search state in one write (Store::StartTrial), or not at
  // all; FailedPrecondition also when the experiment was written since it was read.
  struct TrialOf {
    ExperimentRecord* experiment;  // as the search has just planned it; its revision goes up
    int number = 0;
    std::string reason;  // the trial's first history entry
  };
  absl::StatusOr<JobRecord> Submit(const std::string& manifest, const std::string& tenant,
                                   std::vector<FieldError>* errors, const TrialOf* trial = nullptr);

  // Stops the learners (SIGTERM with the stop grace: each writes a last checkpoint) and records
  // HALTED with `reason`. NotFound for an unknown job; FailedPrecondition if it is already settled,
  // or preempted or resuming (halt it once it is QUEUED).
  absl::Status Halt(const std::string& id, const std::string& reason = "halted by user");

  // A new training budget for a job that resumes: `epochs` in all, and whether it checkpoints at
  // the end (checkpoint.at_end) to be trained on again.
  struct Budget {
    int epochs = 0;
    bool checkpoint_at_end = false;
  };
  // Puts a HALTED job back in the queue (RESUMING -> QUEUED); it continues from its latest
  // checkpoint. With `budget` (a promoted trial's next rung), its spec's training.epochs and
  // checkpoint.at_end become the budget's, written with the RESUMING transition. NotFound;
  // FailedPrecondition unless HALTED; InvalidArgument for a command job or epochs out of
  // [1, 10000] or not above the epochs it has trained; ResourceExhausted, Unavailable: Submit.
  absl::Status Resume(const std::string& id, std::optional<Budget> budget = std::nullopt);

  // Kills the job's learners and removes the job, its history, metrics, models and files.
  // Waits (without the lock, at most 2 s) for the learners to die before removing their files.
  // NotFound for an unknown job.
  absl::Status Delete(const std::string& id);

  // Measures the disk use of every tenant with active jobs and halts the active jobs of those
  // over their quota, each with a reason naming the usage and the quota (control/disk_quota.h).
  // The loop runs it every disk_check_interval_ms, outside the round; nothing without a quota.
  void EnforceDiskQuotas();

  // One control round: reap learner exits, time out silent learners, schedule, start learners.
  void Tick();

  // The typed spec of `job` (parsed once; SpecCache::Get).
  absl::StatusOr<SpecCache::SpecPtr> Spec(const JobRecord& job) { return specs_.Get(job); }
  // The queue, nodes, tenant shares and why jobs wait.
  ClusterView& view() { return view_; }
  // Where a job's files live.
  const JobLayout& layout() const { return layout_; }
  // The live feed of what happens to jobs and experiments (control/event_hub.h).
  EventHub& events() { return events_; }
  // Job `id` as the store holds it, with the sequence number of the newest event it already
  // reflects: a reader of events() that starts after that number misses nothing and sees
  // nothing twice. NotFound for an unknown job; errors from the store.
  absl::StatusOr<std::pair<Store::JobSnapshot, int64_t>> SnapshotForEvents(const std::string& id,
                                                                           int64_t metrics_limit);
  // The credentials learners present to the coordination service.
  const LearnerCredentials& credentials() const { return credentials_; }

  // --- LearnerEvents (control/learner_events.h), called by the coordination service ---
  RegisterDecision OnRegister(const std::string& id, int rank, int64_t attempt, int64_t pid,
                              int world_size, const std::vector<int>& gpus) override;
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
  // One round of the loop: Tick, and EnforceDiskQuotas every disk_check_interval_ms.
  void LoopRound();
  // Halt of job `id` with `reason` in its history.
  absl::Status HaltLocked(const std::string& id, const std::string& reason)
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
  const ControlContext context_;  // what the parts below share
  ElasticMembership membership_;
  LearnerExits exits_;
  AttemptStarter starter_;
  SchedulingRound round_;

  // Serialises the rounds (Tick); taken before mu_, never while holding it.
  absl::Mutex round_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  absl::Mutex mu_;
  AttemptTracker attempts_ ABSL_GUARDED_BY(mu_);
  // Learner exits reaped while the store could not be read, settled by a later round.
  std::vector<LearnerExit> unsettled_exits_ ABSL_GUARDED_BY(mu_);
  // The last round could not list the active jobs (logged once per outage).
  bool store_unreachable_ ABSL_GUARDED_BY(mu_) = false;

  // The loop's own: when it last checked the disk quotas (unix ms; 0 before its first round).
  TimeMs disk_checked_ms_ = 0;
  // Last: stopped (its thread joined) before any part its rounds use is destroyed.
  ControlLoop loop_;
};

}  // namespace weft
