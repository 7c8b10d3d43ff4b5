#include "control/controller.h"
#include "control/controller_internal.h"

#include <signal.h>

#include <algorithm>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/failpoint.h"
#include "common/files.h"
#include "common/ids.h"
#include "common/status_macros.h"
#include "common/logging.h"
#include "job/layout.h"
#include "scheduler/fair_share_policy.h"

namespace weft {
namespace {

scheduler::Resources PerLearner(const JobSpec& spec) {
  return {spec.resources.cpus, spec.resources.memory_mb, spec.resources.gpus};
}

}  // namespace

using control_internal::SpecOf;

Controller::Controller(Store& store, Executor& executor, scheduler::Policy& policy,
                       const Clock& clock, ControllerOptions options)
    : store_(store), executor_(executor), policy_(policy), clock_(clock),
      options_(std::move(options)), layout_(options_.data_dir) {}

Controller::~Controller() { StopLoop(); }

std::string Controller::JobDir(const std::string& id) const { return layout_.JobDir(id); }
std::string Controller::LogDir(const std::string& id) const { return layout_.LogDir(id); }

absl::Status Controller::TransitionLocked(JobRecord& record, JobState to,
                                          const std::string& reason) {
  JobState from = record.state;
  JobRecord next = record;
  next.state = to;
  next.reason = reason;
  next.updated_ms = clock_.NowMs();
  RETURN_IF_ERROR(store_.TransitionJob(next, from));
  Failpoint("after-transition");
  spdlog::info("job {}: {} -> {} ({})", record.id, JobStateName(from), JobStateName(to), reason);
  record = std::move(next);
  return absl::OkStatus();
}

void Controller::FailLocked(JobRecord& record, const std::string& reason) {
  absl::Status s = TransitionLocked(record, JobState::kFailed, reason);
  if (!s.ok()) spdlog::error("job {}: cannot record failure: {}", record.id, s.message());
}

void Controller::RestartOrFailLocked(JobRecord& r, const std::string& reason) {
  auto spec = SpecOf(r);
  int max_restarts = spec.ok() ? spec->max_restarts : 0;
  if (r.restarts >= max_restarts) {
    FailLocked(r, max_restarts == 0 ? reason
                                    : absl::StrCat(reason, " (gave up after ", r.restarts,
                                                   " restarts)"));
    return;
  }
  r.restarts += 1;
  int64_t backoff = options_.restart_backoff_ms << std::min(r.restarts - 1, 16);
  backoff = std::min(backoff, options_.restart_backoff_max_ms);
  auto checkpoints = store_.Checkpoints(r.id);
  std::string from = checkpoints.ok() && !checkpoints->empty()
                         ? absl::StrCat("from the checkpoint at step ", checkpoints->front().step)
                         : std::string("from the beginning (no checkpoint yet)");
  absl::Status s = TransitionLocked(
      r, JobState::kQueued,
      absl::StrFormat("%s; restart %d of %d %s in %.1f s", reason, r.restarts, max_restarts, from,
                      backoff / 1000.0));
  if (!s.ok()) {
    spdlog::error("job {}: cannot requeue: {}", r.id, s.message());
    return;
  }
  not_before_ms_[r.id] = clock_.NowMs() + backoff;
}

absl::Status Controller::Recover() {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(std::vector<JobRecord> jobs, store_.ListJobs(""));
  int requeued = 0, adopted = 0;
  for (JobRecord& r : jobs) {
    const bool preempted = r.state == JobState::kPreempted;
    if (!HoldsResources(r.state) && !preempted) continue;
    // Learners of the current attempt that outlived the previous weftd keep training (or, if
    // their job was being preempted, are told again to checkpoint and stop). A gang is adopted
    // whole or not at all.
    bool started = !r.learners.empty();
    for (const LearnerSlot& l : r.learners) started = started && l.pid > 0;
    auto spec = SpecOf(r);
    if (started && spec.ok()) {
      int taken = 0;
      for (size_t rank = 0; rank < r.learners.size(); ++rank) {
        if (!executor_.Adopt(LaunchFor(r, *spec, static_cast<int>(rank)), r.learners[rank].pid)
                 .ok()) {
          break;
        }
        ++taken;
      }
      if (taken == static_cast<int>(r.learners.size())) {
        if (preempted) {
          executor_.Stop(r.id, options_.stop_grace_ms).IgnoreError();
          continue;
        }
        for (size_t rank = 0; rank < r.learners.size(); ++rank) {
          last_seen_ms_[r.id][static_cast<int>(rank)] = clock_.NowMs();
          registered_[r.id].insert(static_cast<int>(rank));
        }
        spdlog::info("job {}: adopted learner pid {} of attempt {} ({} learner(s) in all)", r.id,
                     r.learners[0].pid, r.attempt, taken);
        adopted += taken;
        continue;
      }
      // Part of the gang is gone: the rest cannot train alone.
      if (taken > 0) executor_.Stop(r.id, 0).IgnoreError();
    }
    // Its learners are gone (or never started): requeue. A straggler of this attempt is fenced
    // off by the attempt number and stops at its next heartbeat.
    r.learners.clear();
    RETURN_IF_ERROR(TransitionLocked(
        r, JobState::kQueued,
        absl::StrCat("requeued: the learners of attempt ", r.attempt,
                     " are gone after a weftd restart; it resumes from its latest checkpoint")));
    ++requeued;
  }
  // A job halted mid-resume is put back in the queue.
  for (JobRecord& r : jobs) {
    if (r.state == JobState::kResuming) {
      RETURN_IF_ERROR(TransitionLocked(r, JobState::kQueued, "resumed"));
    }
  }
  spdlog::info("recovered {} jobs from the store ({} learners adopted, {} jobs requeued)",
               jobs.size(), adopted, requeued);
  return absl::OkStatus();
}

absl::StatusOr<JobRecord> Controller::Submit(const std::string& manifest,
                                             const std::string& tenant,
                                             std::vector<FieldError>* errors) {
  ASSIGN_OR_RETURN(JobSpec spec, ParseManifest(manifest, errors));
  scheduler::JobRequest request;
  request.learners = spec.resources.learners;
  request.per_learner = PerLearner(spec);
  absl::Status fits = scheduler::CheckFeasible(request, options_.nodes);
  if (!fits.ok()) {
    errors->push_back({"resources", std::string(fits.message())});
    return absl::InvalidArgumentError(absl::StrCat("resources: ", fits.message()));
  }
  JobRecord r;
  TimeMs now = clock_.NowMs();
  r.id = NewJobId(now);
  r.tenant = tenant;
  r.name = spec.name;
  r.state = JobState::kQueued;
  r.reason = "submitted";
  r.manifest = manifest;
  r.spec_json = SpecToJson(spec).dump(2);
  r.created_ms = now;
  r.updated_ms = now;
  r.progress.epochs_total = spec.training.epochs;
  // Files first: a job in the store always has its directory and spec.
  RETURN_IF_ERROR(MakeDirs(LogDir(r.id)));
  RETURN_IF_ERROR(WriteFileAtomic(layout_.SpecPath(r.id), r.spec_json + "\n"));
  std::lock_guard<std::mutex> lock(mu_);
  absl::Status s = store_.CreateJob(r, "submitted");
  if (!s.ok()) {
    RemoveAll(JobDir(r.id)).IgnoreError();
    return s;
  }
  spdlog::info("job {} ({}) submitted by tenant {}", r.id, r.name, tenant);
  return r;
}

absl::Status Controller::Halt(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
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
  r.learners.clear();
  RETURN_IF_ERROR(TransitionLocked(r, JobState::kHalted, "halted by user"));
  waiting_.erase(id);
  if (had_learners) RETURN_IF_ERROR(executor_.Stop(id, options_.stop_grace_ms));
  return absl::OkStatus();
}

absl::Status Controller::Resume(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(JobRecord r, store_.GetJob(id));
  if (r.state != JobState::kHalted) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " is ", JobStateName(r.state), "; only HALTED jobs resume"));
  }
  RETURN_IF_ERROR(TransitionLocked(r, JobState::kResuming, "resume requested by user"));
  return TransitionLocked(r, JobState::kQueued, "resumed: back in the queue");
}

absl::Status Controller::Delete(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(JobRecord r, store_.GetJob(id));
  RETURN_IF_ERROR(executor_.Stop(id, /*grace_ms=*/0));
  // Let the learners die before their files go, so none writes into a removed directory.
  for (int i = 0; i < 100 && executor_.Running(id) > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  RETURN_IF_ERROR(store_.DeleteJob(id));
  waiting_.erase(id);
  ForgetAttemptLocked(id);
  not_before_ms_.erase(id);
  RETURN_IF_ERROR(RemoveAll(JobDir(id)));
  spdlog::info("job {} deleted", id);
  return absl::OkStatus();
}

std::string Controller::WaitingReason(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = waiting_.find(id);
  return it == waiting_.end() ? "" : it->second;
}

std::string Controller::LearnerCredential(const std::string& id) const {
  if (options_.learner_key.empty()) return "";
  return HmacSha256Hex(options_.learner_key, "weft-learner:" + id);
}

bool Controller::CheckLearnerCredential(const std::string& id, const std::string& credential) const {
  if (options_.learner_key.empty()) return true;
  return ConstantTimeEquals(LearnerCredential(id), credential);
}

absl::StatusOr<std::vector<Controller::QueueEntry>> Controller::Queue(const std::string& tenant) const {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(std::vector<JobRecord> jobs, store_.ListJobs(tenant));
  std::vector<QueueEntry> out;
  for (const JobRecord& r : jobs) {
    if (!InQueue(r.state)) continue;
    QueueEntry e;
    e.job = r;
    auto spec = SpecOf(r);
    e.priority = spec.ok() ? spec->priority : 0;
    auto w = waiting_.find(r.id);
    e.reason = r.state == JobState::kPreempted ? "preempted: checkpointing before it requeues"
               : w != waiting_.end()           ? w->second
                                               : "waiting: next scheduling round";
    out.push_back(std::move(e));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const QueueEntry& a, const QueueEntry& b) { return a.priority > b.priority; });
  return out;
}

absl::StatusOr<std::vector<Controller::NodeUsage>> Controller::Nodes() const {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(std::vector<JobRecord> jobs, store_.ListJobs(""));
  std::vector<NodeUsage> out;
  for (const auto& n : options_.nodes) out.push_back({n, {}});
  for (const JobRecord& r : jobs) {
    if (!HoldsResources(r.state) && r.state != JobState::kPreempted) continue;
    auto spec = SpecOf(r);
    if (!spec.ok()) continue;
    for (auto& u : out) {
      int here = 0;
      for (const LearnerSlot& l : r.learners) here += l.node == u.node.name;
      if (here == 0) continue;
      u.node.allocated += PerLearner(*spec).Times(here);
      u.jobs.push_back(r);
    }
  }
  return out;
}

absl::StatusOr<std::vector<Controller::TenantUsage>> Controller::Usage() const {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(std::vector<TenantRecord> tenants, store_.ListTenants());
  ASSIGN_OR_RETURN(std::vector<JobRecord> jobs, store_.ListJobs(""));
  scheduler::Resources total;
  for (const auto& n : options_.nodes) total += n.capacity;
  std::vector<TenantUsage> out;
  double weights = 0;
  for (const TenantRecord& t : tenants) {
    TenantUsage u;
    u.tenant = t;
    for (const JobRecord& r : jobs) {
      if (r.tenant != t.name) continue;
      if (InQueue(r.state)) ++u.queued_jobs;
      if (!HoldsResources(r.state)) continue;
      auto spec = SpecOf(r);
      if (!spec.ok()) continue;
      u.used += PerLearner(*spec).Times(spec->resources.learners);
      ++u.running_jobs;
    }
    u.dominant_share = scheduler::DominantShare(u.used, total, 1);
    if (u.running_jobs + u.queued_jobs > 0) weights += t.weight > 0 ? t.weight : 1;
    out.push_back(std::move(u));
  }
  for (auto& u : out) {
    if (u.running_jobs + u.queued_jobs > 0 && weights > 0) {
      u.fair_share = (u.tenant.weight > 0 ? u.tenant.weight : 1) / weights;
    }
  }
  return out;
}

void Controller::SetCoordinatorAddress(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  options_.coordinator_address = address;
}

void Controller::StartLoop() {
  loop_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(loop_mu_);
    while (!loop_stop_) {
      lock.unlock();
      Tick();
      lock.lock();
      loop_cv_.wait_for(lock, std::chrono::milliseconds(options_.schedule_interval_ms),
                        [this] { return loop_stop_; });
    }
  });
}

void Controller::StopLoop() {
  {
    std::lock_guard<std::mutex> lock(loop_mu_);
    loop_stop_ = true;
  }
  loop_cv_.notify_all();
  if (loop_.joinable()) loop_.join();
}

void Controller::Tick() {
  std::vector<LearnerExit> exits = executor_.Reap();
  // When several learners of a gang end in one round, the cause goes first: a learner killed by
  // a signal, then one that failed, then the rest (its peers exit because it is gone).
  auto severity = [](const LearnerExit& e) {
    return e.signal != 0 ? 0 : (!e.status_unknown && e.exit_code != 0) ? 1 : 2;
  };
  std::stable_sort(exits.begin(), exits.end(), [&](const LearnerExit& a, const LearnerExit& b) {
    return severity(a) < severity(b);
  });
  std::lock_guard<std::mutex> lock(mu_);
  for (const LearnerExit& e : exits) HandleExitLocked(e);
  auto jobs = store_.ListJobs("");
  if (!jobs.ok()) {
    spdlog::error("control round skipped: {}", jobs.status().message());
    return;
  }
  CheckLivenessLocked(*jobs);
  ScheduleLocked(*jobs);
}

void Controller::ForgetAttemptLocked(const std::string& id) {
  finished_.erase(id);
  last_seen_ms_.erase(id);
  registered_.erase(id);
  failing_.erase(id);
}

std::string Controller::LastLogLine(const std::string& id, int rank) const {
  std::ifstream in(layout_.LogPath(id, rank));
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

void Controller::HandleExitLocked(const LearnerExit& e) {
  auto rec = store_.GetJob(e.job_id);
  if (!rec.ok()) return;  // deleted
  JobRecord r = *rec;
  if (e.attempt == r.attempt && r.state == JobState::kPreempted) {
    if (int left = executor_.Running(e.job_id); left > 0) {
      spdlog::info("job {}: preempted learner rank {} {}; waiting for {} more", e.job_id, e.rank,
                   e.Describe(), left);
      return;
    }
    ForgetAttemptLocked(e.job_id);
    r.learners.clear();
    absl::Status s = TransitionLocked(
        r, JobState::kQueued,
        absl::StrCat("requeued after preemption (learner rank ", e.rank, " ", e.Describe(),
                     "); it resumes from its latest checkpoint"));
    if (!s.ok()) spdlog::error("job {}: {}", r.id, s.message());
    return;
  }
  if (e.attempt != r.attempt || (!RunsLearners(r.state) && r.state != JobState::kPlaced)) {
    spdlog::info("job {}: learner of attempt {} ended ({}) after the job moved on", e.job_id,
                 e.attempt, e.Describe());
    return;
  }
  if (auto f = failing_.find(e.job_id); f != failing_.end()) {
    // A gang whose learner failed: the survivors are checkpointing and stopping.
    if (int left = executor_.Running(e.job_id); left > 0) {
      spdlog::info("job {}: learner rank {} {}; waiting for {} more of the failed gang", e.job_id,
                   e.rank, e.Describe(), left);
      return;
    }
    Failure failure = f->second;
    failing_.erase(f);
    ForgetAttemptLocked(e.job_id);
    r.learners.clear();
    if (failure.user_error) {
      FailLocked(r, failure.reason);
    } else {
      RestartOrFailLocked(r, failure.reason);
    }
    return;
  }
  Finish finish;
  if (auto it = finished_.find(e.job_id); it != finished_.end()) {
    if (auto f = it->second.find(e.rank); f != it->second.end()) finish = f->second;
  }
  bool exited_ok = e.status_unknown || (e.signal == 0 && e.exit_code == 0);
  if (e.rank != 0 && exited_ok) {
    // A rank that finished its part; rank 0 exports the model and decides how the job ends.
    if (auto it = last_seen_ms_.find(e.job_id); it != last_seen_ms_.end()) it->second.erase(e.rank);
    spdlog::info("job {}: learner rank {} {}", e.job_id, e.rank, e.Describe());
    return;
  }
  if (exited_ok && finish.succeeded) {
    ForgetAttemptLocked(e.job_id);
    r.learners.clear();
    // The other ranks are done training too; make sure none lingers.
    executor_.Stop(e.job_id, options_.stop_grace_ms).IgnoreError();
    auto artifacts = store_.Artifacts(e.job_id);
    bool has_final = false;
    if (artifacts.ok()) {
      for (const auto& a : *artifacts) has_final = has_final || a.kind == kFinalModel;
    }
    if (!has_final) {
      FailLocked(r, "learner exited without committing a final model");
      return;
    }
    absl::Status s = TransitionLocked(r, JobState::kCompleted, finish.reason);
    if (!s.ok()) spdlog::error("job {}: {}", r.id, s.message());
    return;
  }
  // The learner's own reason, else (for an exit, not a kill) its last log line.
  std::string why = !finish.reason.empty() ? finish.reason
                    : e.signal == 0        ? LastLogLine(e.job_id, e.rank)
                                           : std::string();
  std::string reason = absl::StrCat("learner ", e.rank > 0 ? absl::StrCat("rank ", e.rank, " ") : "",
                                    e.Describe(), why.empty() ? "" : ": ", why);
  // A user error (bad spec, missing data, a model that does not build) fails at once.
  bool user_error = !e.status_unknown && e.signal == 0 && e.exit_code == kLearnerExitUserError;
  bool clean_exit = !e.status_unknown && e.signal == 0 && e.exit_code == 0;
  if (executor_.Running(e.job_id) > 0) {
    // The rest of the gang cannot go on without this learner: their next allreduce fails. Rank 0,
    // if it survives, checkpoints the last step all ranks completed before it exits (its replica
    // is the gang's state), so the restart loses (almost) nothing. SIGKILL after the grace.
    spdlog::warn("job {}: {}; stopping the rest of the gang ({} ms to checkpoint)", e.job_id,
                 reason, options_.stop_grace_ms);
    failing_[e.job_id] = {reason, user_error || clean_exit};
    executor_.Stop(e.job_id, options_.stop_grace_ms).IgnoreError();
    return;
  }
  ForgetAttemptLocked(e.job_id);
  r.learners.clear();
  if (user_error || clean_exit) {
    FailLocked(r, reason);
  } else {
    RestartOrFailLocked(r, reason);
  }
}

void Controller::CheckLivenessLocked(std::vector<JobRecord>& jobs) {
  TimeMs now = clock_.NowMs();
  for (JobRecord& r : jobs) {
    if (!RunsLearners(r.state) || failing_.count(r.id)) continue;
    int64_t limit = r.state == JobState::kStarting ? options_.start_timeout_ms
                                                   : options_.heartbeat_timeout_ms;
    // The longest-silent learner of the gang; one that has exited cleanly is no longer watched.
    const auto& seen_by_rank = last_seen_ms_[r.id];
    int silent_rank = -1;
    TimeMs oldest = now;
    const int world = std::max<int>(1, static_cast<int>(r.learners.size()));
    for (int rank = 0; rank < world; ++rank) {
      auto it = seen_by_rank.find(rank);
      if (it == seen_by_rank.end() && r.state != JobState::kStarting) continue;
      TimeMs seen = it != seen_by_rank.end() ? it->second : r.updated_ms;
      if (seen < oldest) {
        oldest = seen;
        silent_rank = rank;
      }
    }
    if (silent_rank < 0 || now - oldest <= limit) continue;
    spdlog::warn("job {}: learner rank {} silent for {} ms, stopping the job's learners", r.id,
                 silent_rank, now - oldest);
    executor_.Stop(r.id, 0).IgnoreError();
    ForgetAttemptLocked(r.id);
    r.learners.clear();
    RestartOrFailLocked(
        r, absl::StrFormat("learner%s stopped heartbeating (silent %.0f s)",
                           world > 1 ? absl::StrCat(" rank ", silent_rank) : std::string(),
                           (now - oldest) / 1000.0));
  }
}

void Controller::ScheduleLocked(const std::vector<JobRecord>& jobs) {
  scheduler::ClusterSnapshot snap;
  snap.now_ms = clock_.NowMs();
  snap.nodes = options_.nodes;
  if (auto tenants = store_.ListTenants(); tenants.ok()) {
    for (const TenantRecord& t : *tenants) {
      scheduler::TenantShare share;
      share.has_quota = t.has_quota;
      share.quota = {t.quota_cpus, t.quota_memory_mb, t.quota_gpus};
      share.weight = t.weight;
      snap.tenants[t.name] = share;
    }
  }
  std::map<std::string, JobRecord> candidates;  // queued and running, by id
  waiting_.clear();
  for (const JobRecord& r : jobs) {
    const bool preempted = r.state == JobState::kPreempted;
    if (r.state != JobState::kQueued && !HoldsResources(r.state) && !preempted) continue;
    auto spec = SpecOf(r);
    if (!spec.ok()) continue;
    scheduler::JobRequest req;
    req.job_id = r.id;
    req.tenant = r.tenant;
    req.submitted_ms = r.created_ms;
    req.learners = req.min_learners = req.max_learners = spec->resources.learners;
    req.per_learner = PerLearner(*spec);
    req.restarts = r.restarts;
    req.priority = spec->priority;
    req.spread = spec->resources.placement == "spread";
    if (HoldsResources(r.state) || preempted) {
      for (const LearnerSlot& l : r.learners) {
        for (auto& n : snap.nodes) {
          if (n.name == l.node) n.allocated += req.per_learner;
        }
      }
      // A job being preempted still holds its node until its learner has checkpointed and
      // exited; it is not the policy's to decide about again.
      if (preempted) continue;
      for (const LearnerSlot& l : r.learners) req.allocation.push_back(l.node);
      snap.jobs.push_back(std::move(req));
      candidates[r.id] = r;
      continue;
    }
    // Jobs in restart backoff sit out this round.
    auto nb = not_before_ms_.find(r.id);
    if (nb != not_before_ms_.end() && nb->second > snap.now_ms) {
      waiting_[r.id] = absl::StrFormat("waiting: restart backoff, %.1f s left",
                                       (nb->second - snap.now_ms) / 1000.0);
      continue;
    }
    snap.jobs.push_back(std::move(req));
    candidates[r.id] = r;
  }
  bool any_waiting = false;
  for (const auto& j : snap.jobs) any_waiting = any_waiting || j.Waiting();
  if (!any_waiting) return;
  scheduler::Decisions d = policy_.Schedule(snap);
  for (const auto& w : d.waiting) waiting_[w.job_id] = w.reason;
  for (const auto& id : d.preempted) {
    auto it = candidates.find(id);
    if (it == candidates.end()) continue;
    JobState st = it->second.state;
    if (st == JobState::kStarting || st == JobState::kRunning || st == JobState::kDelivered) {
      PreemptLocked(it->second);
    }
  }
  for (const auto& p : d.placements) {
    auto it = candidates.find(p.job_id);
    if (it != candidates.end() && it->second.state == JobState::kQueued) StartJobLocked(it->second, p);
  }
}

void Controller::PreemptLocked(JobRecord r) {
  absl::Status s = TransitionLocked(
      r, JobState::kPreempted,
      "preempted by the scheduler for a higher-priority job or a tenant below its fair share; "
      "checkpointing before it goes back to the queue");
  if (!s.ok()) {
    spdlog::error("job {}: {}", r.id, s.message());
    return;
  }
  spdlog::info("job {}: preempted, stopping its learner with {} ms to checkpoint", r.id,
               options_.stop_grace_ms);
  executor_.Stop(r.id, options_.stop_grace_ms).IgnoreError();
}

LearnerLaunch Controller::LaunchFor(const JobRecord& r, const JobSpec& spec, int rank,
                                    const std::pair<std::string, int>& rendezvous) const {
  LearnerLaunch l;
  l.job_id = r.id;
  l.attempt = r.attempt;
  l.rank = rank;
  l.world_size = spec.resources.learners;
  l.node = rank < static_cast<int>(r.learners.size()) ? r.learners[rank].node : "";
  if (l.world_size > 1) {
    l.rendezvous_host = rendezvous.first;
    l.rendezvous_port = rendezvous.second;
  }
  l.spec_path = layout_.SpecPath(r.id);
  l.data_dir = spec.data.path;
  l.result_dir = layout_.ResultDir(r.id);
  l.checkpoint_dir = layout_.CheckpointDir(r.id);
  l.log_dir = layout_.LogDir(r.id);
  l.coordinator_address = options_.coordinator_address;
  l.threads = spec.EffectiveThreads();
  l.credential = LearnerCredential(r.id);
  if (auto it = options_.node_cpusets.find(l.node); it != options_.node_cpusets.end()) {
    l.cpuset = it->second;
  }
  return l;
}

void Controller::StartJobLocked(JobRecord r, const scheduler::Placement& p) {
  auto spec = SpecOf(r);
  if (!spec.ok()) {
    FailLocked(r, std::string(spec.status().message()));
    return;
  }
  const int world = spec->resources.learners;
  if (static_cast<int>(p.learner_nodes.size()) != world) {
    spdlog::error("job {}: the policy placed {} learners of a gang of {}; not starting it", r.id,
                  p.learner_nodes.size(), world);
    return;
  }
  r.attempt += 1;
  r.learners.clear();
  for (const std::string& node : p.learner_nodes) r.learners.push_back({node, 0});
  std::vector<std::string> distinct;
  for (const std::string& node : p.learner_nodes) {
    if (std::find(distinct.begin(), distinct.end(), node) == distinct.end()) distinct.push_back(node);
  }
  absl::Status s = TransitionLocked(
      r, JobState::kPlaced,
      world == 1 ? absl::StrCat("placed on node ", p.learner_nodes[0])
                 : absl::StrCat("placed ", world, " learners on ",
                                distinct.size() == 1 ? "node " : "nodes ",
                                absl::StrJoin(distinct.size() == 1 ? distinct : p.learner_nodes,
                                              ", ")));
  if (!s.ok()) {
    spdlog::error("job {}: {}", r.id, s.message());
    return;
  }
  std::pair<std::string, int> rendezvous;
  if (world > 1) {
    absl::StatusOr<std::pair<std::string, int>> address =
        executor_.RendezvousAddress(r.learners[0].node);
    if (!address.ok()) {
      r.learners.clear();
      RestartOrFailLocked(r, absl::StrCat("cannot start the gang: ", address.status().message()));
      return;
    }
    rendezvous = *address;
  }
  s = TransitionLocked(
      r, JobState::kStarting,
      world == 1 ? absl::StrCat("starting learner, attempt ", r.attempt)
                 : absl::StrCat("starting ", world, " learners, attempt ", r.attempt,
                                ", rendezvous at ", rendezvous.first, ":", rendezvous.second));
  if (!s.ok()) {
    spdlog::error("job {}: {}", r.id, s.message());
    return;
  }
  ForgetAttemptLocked(r.id);
  for (int rank = 0; rank < world; ++rank) {
    absl::StatusOr<int64_t> pid = executor_.Start(LaunchFor(r, *spec, rank, rendezvous));
    if (!pid.ok()) {
      // All or nothing: a gang missing a learner cannot train.
      executor_.Stop(r.id, 0).IgnoreError();
      r.learners.clear();
      FailLocked(r, absl::StrCat("cannot start learner rank ", rank, ": ", pid.status().message()));
      return;
    }
    r.learners[rank].pid = *pid;
    last_seen_ms_[r.id][rank] = clock_.NowMs();
  }
  s = store_.UpdateJob(r);
  if (!s.ok()) spdlog::error("job {}: cannot record learner pids: {}", r.id, s.message());
}

}  // namespace weft
