// The controller's lifecycle core: submission (checked and laid out by admission.h) and the
// user's actions (halt, resume, delete). A state changes only through JobRecorder::Transition
// (job_recorder.h: stored first, then acted on). The control loop is in controller_loop.cc.
#include "control/controller.h"

#include <chrono>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "control/recovery.h"

namespace weft {

Controller::Controller(Store& store, Executor& executor, scheduler::Policy& policy,
                       const Clock& clock, ControllerOptions options, Env& env)
    : store_(store),
      executor_(executor),
      policy_(policy),
      clock_(clock),
      env_(env),
      options_(std::move(options)),
      layout_(options_.data_dir),
      credentials_(options_.learner_key),
      models_(store),
      recorder_(store, clock, events_, models_),
      view_(store, specs_, models_, options_.nodes),
      admission_(store, executor, env, clock, options_, layout_),
      launches_(store, executor, credentials_, options_, layout_),
      context_{store, executor, specs_, recorder_, launches_, clock, options_, layout_, env_},
      membership_(context_),
      exits_(context_, membership_),
      starter_(context_, exits_),
      round_({store, executor, policy, recorder_, view_, membership_, starter_, clock,
              options_.stop_grace_ms}),
      loop_([this] { LoopRound(); }, options_.schedule_interval_ms) {
  MetricsRegistry& m = MetricsRegistry::Global();
  m.DeclareCounter(kTransitionsMetric, "job state transitions by tenant and the state entered");
  m.DeclareCounter(kRestartsMetric, "job restarts after a learner failure, by tenant");
  m.DeclareCounter(kModelsMetric, "models committed by tenant and kind (delivered, final)");
  m.DeclareCounter(kCheckpointsMetric, "checkpoints committed, by tenant");
  m.DeclareCounter(kCheckpointBytesMetric, "bytes of the checkpoints committed, by tenant");
  m.DeclareHistogram(kCheckpointSecondsMetric,
                     "seconds a learner took to serialise and durably write a checkpoint it "
                     "committed, as it reported, by tenant",
                     {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60});
  m.DeclareHistogram(
      kRoundMetric, "scheduling rounds that ran the policy, in seconds",
      {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1});
}

Controller::~Controller() { StopLoop(); }

absl::Status Controller::Recover() {
  absl::MutexLock lock(&mu_);
  Recovery recovery(context_, membership_, exits_);
  return recovery.Recover(attempts_);
}

absl::StatusOr<JobRecord> Controller::Submit(const std::string& manifest, const std::string& tenant,
                                             std::vector<FieldError>* errors,
                                             const TrialOf* trial) {
  ASSIGN_OR_RETURN(Admission::Admitted a, admission_.Prepare(manifest, tenant, errors));
  JobRecord& r = a.record;
  if (trial != nullptr) {
    r.experiment = trial->experiment->id;
    r.trial = trial->number;
  }
  specs_.Put(r.id, std::move(a.spec));
  absl::Status s;
  {
    // Under mu_: concurrent submissions cannot pass a job limit together, and the loop sees
    // the job's "submitted" event before any of its transitions.
    absl::MutexLock lock(&mu_);
    s = admission_.CheckJobLimits(tenant);
    if (s.ok()) {
      s = trial == nullptr ? store_.CreateJob(r, "submitted")
                           : store_.StartTrial(*trial->experiment, r, trial->reason);
    }
    if (s.ok()) recorder_.Submitted(r);
  }
  if (!s.ok()) {
    specs_.Erase(r.id);
    admission_.Discard(r.id);
    return s;
  }
  spdlog::info("job {} ({}) submitted by tenant {}", r.id, r.name, tenant);
  return r;
}

absl::Status Controller::Halt(const std::string& id, const std::string& reason) {
  absl::MutexLock lock(&mu_);
  return HaltLocked(id, reason);
}

absl::Status Controller::HaltLocked(const std::string& id, const std::string& reason) {
  ASSIGN_OR_RETURN(JobRecord r, store_.GetJob(id));
  if (IsSettled(r.state)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " is already ", JobStateName(r.state)));
  }
  if (r.state == JobState::kPreempted || r.state == JobState::kResuming) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " is ", JobStateName(r.state), "; halt it once it is QUEUED"));
  }
  bool had_learners = HoldsResources(r.state);
  r.ClearGang(clock_.NowMs());
  RETURN_IF_ERROR(recorder_.Transition(r, JobState::kHalted, reason));
  view_.Forget(id);
  if (had_learners) RETURN_IF_ERROR(executor_.Stop(id, options_.stop_grace_ms));
  return absl::OkStatus();
}

absl::Status Controller::Resume(const std::string& id, std::optional<Budget> budget) {
  RETURN_IF_ERROR(executor_.Available());
  if (options_.disk_quota != nullptr) {
    // A tenant at its quota would only be halted again. Measured before the lock, and only for
    // a job that can resume (for another the answer below says why not).
    ASSIGN_OR_RETURN(JobRecord job, store_.GetJob(id));
    if (job.state == JobState::kHalted) {
      RETURN_IF_ERROR(options_.disk_quota->CheckRoom(job.tenant, 0));
    }
  }
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(JobRecord r, store_.GetJob(id));
  if (r.state != JobState::kHalted) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " is ", JobStateName(r.state), "; only HALTED jobs resume"));
  }
  std::string reason = "resume requested by user";
  if (budget) {
    ASSIGN_OR_RETURN(SpecCache::SpecPtr spec, specs_.Get(r));
    if (spec->IsCommandJob()) {
      return absl::InvalidArgumentError(
          absl::StrCat("job ", id, " is a command job: its program sets its own budget"));
    }
    const int epochs = budget->epochs;
    if (epochs < 1 || epochs > kMaxJobEpochs || epochs <= r.progress.epoch) {
      return absl::InvalidArgumentError(absl::StrCat("epochs must be in [1, ", kMaxJobEpochs,
                                                     "] and above the ", r.progress.epoch,
                                                     " the job has trained, got ", epochs));
    }
    JobSpec longer = *spec;
    longer.training.epochs = epochs;
    longer.checkpoint.at_end = budget->checkpoint_at_end;
    reason = absl::StrCat("resumed with a budget of ", epochs, " epochs (was ",
                          spec->training.epochs, ")");
    r.spec_json = SpecToJson(longer).dump();
    r.progress.epochs_total = epochs;
    specs_.Put(id, std::move(longer));
  }
  // The learners read the spec the store holds, whatever an earlier resume left in the file.
  RETURN_IF_ERROR(WriteFileAtomic(env_, layout_.SpecPath(id), r.spec_json + "\n"));
  absl::Status s = recorder_.Transition(r, JobState::kResuming, reason);
  if (!s.ok()) {
    specs_.Erase(id);  // parsed again from the store
    return s;
  }
  return recorder_.Transition(r, JobState::kQueued, "resumed: back in the queue");
}

absl::Status Controller::Delete(const std::string& id) {
  std::string tenant, deleted_dir;
  JobState last_state = JobState::kQueued;
  {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(JobRecord r, store_.GetJob(id));
    tenant = r.tenant;
    deleted_dir = absl::StrCat(layout_.DeletedDir(tenant), "/", id);
    last_state = r.state;
    // The GPU time of the learners it still holds is counted first: it stays its tenant's.
    if (const TimeMs now = clock_.NowMs(); r.GpuMs(now) > r.gpu_ms) {
      r.ClearGang(now);
      RETURN_IF_ERROR(store_.UpdateJob(r));
    }
    RETURN_IF_ERROR(executor_.Stop(id, /*grace_ms=*/0));
    // Its files move to the tenant's deleted jobs first, where they count toward its disk quota
    // until they are gone, whatever fails in between.
    RETURN_IF_ERROR(env_.MakeDirs(layout_.DeletedDir(tenant)));
    absl::Status moved = env_.RenameFile(layout_.JobDir(id), deleted_dir);
    if (!moved.ok() && !absl::IsNotFound(moved)) {
      // What an earlier delete of it, cut short, left there is in the way.
      RETURN_IF_ERROR(env_.RemoveAll(deleted_dir));
      moved = env_.RenameFile(layout_.JobDir(id), deleted_dir);
      if (!moved.ok() && !absl::IsNotFound(moved)) return moved;
    }
    // Gone from the store next: from here no learner of it is accepted and no round sees it.
    if (absl::Status s = store_.DeleteJob(id); !s.ok()) {
      if (moved.ok()) env_.RenameFile(deleted_dir, layout_.JobDir(id)).IgnoreError();
      return s;
    }
    attempts_.Erase(id);
    recorder_.Deleted(id, tenant, last_state);
  }
  specs_.Erase(id);
  view_.Forget(id);
  models_.Forget(id);
  // Let the learners die before their files go, so none writes into a removed directory. Not
  // under the lock: other jobs' learners and the scheduling round carry on meanwhile.
  for (int i = 0; i < 100 && executor_.Running(id) > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  absl::Status removed = env_.RemoveAll(deleted_dir);
  if (options_.disk_quota != nullptr) options_.disk_quota->Forget(tenant);
  if (!removed.ok()) {
    spdlog::warn(
        "job {} deleted, but not all of its files: {}; what is left counts toward tenant "
        "{}'s disk quota until weftd removes it at its next start",
        id, removed.message(), tenant);
    return absl::InternalError(
        absl::StrCat("job ", id, " is deleted but not all of its files: ", removed.message()));
  }
  spdlog::info("job {} deleted", id);
  return absl::OkStatus();
}

absl::StatusOr<std::pair<Store::JobSnapshot, int64_t>> Controller::SnapshotForEvents(
    const std::string& id, int64_t metrics_limit) {
  // Every event is published under mu_, right after the store write it reports.
  absl::MutexLock lock(&mu_);
  const int64_t seq = events_.LastSeq();
  ASSIGN_OR_RETURN(Store::JobSnapshot snapshot, store_.GetJobSnapshot(id, metrics_limit));
  return std::make_pair(std::move(snapshot), seq);
}

void Controller::SetCoordinatorAddress(const std::string& address) {
  launches_.SetCoordinatorAddress(address);
}

void Controller::EnforceDiskQuotas() {
  if (options_.disk_quota == nullptr) return;
  absl::StatusOr<std::vector<JobRecord>> active = store_.ListActiveJobs();
  std::set<std::string> tenants;
  if (active.ok()) {
    for (const JobRecord& j : *active) tenants.insert(j.tenant);
  }
  // Measured without the lock: walking a tenant's files must not hold up learners' heartbeats.
  absl::StatusOr<std::vector<DiskQuota::Over>> over =
      active.ok() ? options_.disk_quota->OverQuota({tenants.begin(), tenants.end()})
                  : active.status();
  if (!over.ok()) {
    spdlog::warn("disk quotas not checked: {}", over.status().message());
    return;
  }
  for (const DiskQuota::Over& o : *over) {
    for (const JobRecord& j : *active) {
      if (j.tenant != o.tenant) continue;
      absl::MutexLock lock(&mu_);
      // A job already settled, or between preemption and the queue, is left to the next check.
      if (HaltLocked(j.id, absl::StrCat("halted: ", o.Reason())).ok()) {
        spdlog::warn("job {} halted: {}", j.id, o.Reason());
      }
    }
  }
}

}  // namespace weft
