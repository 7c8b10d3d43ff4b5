// LearnerExits: learner exits and silences become the outcome of an attempt
// (control/learner_exits.h).
#include "control/learner_exits.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/metrics.h"
#include "common/text.h"
#include "control/kernel_choices.h"

namespace weft {
namespace {

// "learner", "learner rank 2" or "parameter server 1" for the process of `rank` (an executor
// handle's). A scale-out parameter-server job's servers have the ranks after its learners': one
// exits 0 when rank 0 shuts it down, and any other end loses the range it held (the job restarts
// from its latest checkpoint).
std::string MemberName(const JobRecord& r, int rank) {
  const int server = rank - static_cast<int>(r.learners.size());
  if (!r.servers.empty() && server >= 0) return absl::StrCat("parameter server ", server);
  return rank > 0 ? absl::StrCat("learner rank ", rank) : "learner";
}

// The log of the process of `rank`.
std::string LogPathOf(const JobLayout& layout, const JobRecord& r, int rank) {
  const int server = rank - static_cast<int>(r.learners.size());
  if (!r.servers.empty() && server >= 0) {
    return ParameterServerLogPath(layout.LogDir(r.id), server);
  }
  return layout.LogPath(r.id, rank);
}

// The last line of the log at `path`, printable and at most 500 bytes ("" if none).
std::string LastLogLine(const std::string& path) {
  // Only the log's tail is read (a learner's log can be large), and what it says is the tenant's
  // text: escaped before it becomes a reason.
  constexpr off_t kTail = 4096;
  const int fd = OpenNoSymlinks(path, O_RDONLY | O_NONBLOCK);
  if (fd < 0) return "";
  struct stat st {};
  std::string tail(kTail, '\0');
  ssize_t n = 0;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    n = ::pread(fd, tail.data(), tail.size(), std::max<off_t>(0, st.st_size - kTail));
  }
  ::close(fd);
  tail.resize(n > 0 ? static_cast<size_t>(n) : 0);
  std::string last;
  for (absl::string_view line : absl::StrSplit(tail, '\n')) {
    if (!line.empty()) last = std::string(line);
  }
  return Printable(last, 500);
}

}  // namespace

bool LearnerExits::Settle(AttemptTracker& attempts, const LearnerExit& e) {
  auto rec = c_.store.GetJob(e.job_id);
  if (absl::IsNotFound(rec.status())) return true;  // deleted
  if (!rec.ok()) return false;                      // the store cannot be read
  JobRecord r = *rec;
  if (e.attempt == r.attempt && r.state == JobState::kPreempted) {
    SettlePreempted(attempts, r, e);
    return true;
  }
  if (e.attempt != r.attempt || (!RunsLearners(r.state) && r.state != JobState::kPlaced)) {
    spdlog::info("job {}: learner of attempt {} ended ({}) after the job moved on", e.job_id,
                 e.attempt, e.Describe());
    return true;
  }
  AttemptTracker::Attempt& attempt = attempts.Of(e.job_id);
  if (attempt.failure) {
    SettleFailingGang(attempts, r, e);
    return true;
  }
  if (attempt.leaving.erase(e.rank) > 0) {
    // A learner a shrink told to leave: not a member any more, whatever its exit says; its node
    // is free from the next round on.
    attempt.finished.erase(e.rank);
    spdlog::info("job {}: learner {} left after the shrink ({})", e.job_id, e.rank, e.Describe());
    return true;
  }
  AttemptTracker::Finish finish;
  if (auto f = attempt.finished.find(e.rank); f != attempt.finished.end()) finish = f->second;
  const bool exited_ok = e.status_unknown || (e.signal == 0 && e.exit_code == 0);
  // e.rank is the learner's id; the current rank 0 (the first learner) leads.
  const int leader = r.learners.empty() ? 0 : r.learners[0].id;
  if (e.rank != leader && exited_ok) {
    // A rank that finished its part; rank 0 exports the model and decides how the job ends.
    attempt.last_seen_ms.erase(e.rank);
    spdlog::info("job {}: {} {}", e.job_id, MemberName(r, e.rank), e.Describe());
    return true;
  }
  if (exited_ok && finish.succeeded) {
    Complete(attempts, r, finish.reason);
    return true;
  }
  SettleLoss(attempts, r, e, finish.reason);
  return true;
}

void LearnerExits::SettleLoss(AttemptTracker& attempts, JobRecord& r, const LearnerExit& e,
                              const std::string& finished_reason) {
  AttemptTracker::Attempt& attempt = attempts.Of(e.job_id);
  // The learner's own reason, else (for an exit, not a kill) its last log line.
  std::string why = !finished_reason.empty() ? finished_reason
                    : e.signal != 0          ? std::string()
                                             : LastLogLine(LogPathOf(c_.layout, r, e.rank));
  if (auto s = attempt.silenced.find(e.rank); s != attempt.silenced.end()) why = s->second.first;
  std::string reason =
      absl::StrCat(MemberName(r, e.rank), " ", e.Describe(), why.empty() ? "" : ": ", why);
  // A user error (bad spec, missing data, a model that does not build, a learner killed for
  // going over its memory) fails at once, and so does a learner that exits 0 without having
  // reported success.
  const bool user_error = !e.killed_for.empty() || (!e.status_unknown && e.signal == 0 &&
                                                    e.exit_code == kLearnerExitUserError);
  const bool clean_exit = !e.status_unknown && e.signal == 0 && e.exit_code == 0;
  // A parameter-server job's learner other than rank 0 is replaced alone.
  const int leader = r.learners.empty() ? 0 : r.learners[0].id;
  if (!user_error && !clean_exit && e.rank != leader &&
      membership_.ReplaceLearner(
          attempts, r, e.rank,
          absl::StrCat("learner ", e.rank, " ", e.Describe(), why.empty() ? "" : ": ", why))) {
    return;
  }
  // An elastic job goes on without the learner if enough are left: a new generation.
  if (!user_error && !clean_exit &&
      membership_.Regroup(
          attempts, r, e.rank,
          absl::StrCat("learner ", e.rank, " ", e.Describe(), why.empty() ? "" : ": ", why))) {
    return;
  }
  if (c_.executor.Unreaped(e.job_id) > 0) {
    // The rest of the gang cannot go on without this learner: their next allreduce fails. Rank 0,
    // if it survives, checkpoints the last step all ranks completed before it exits (its replica
    // is the gang's state), so the restart loses (almost) nothing. SIGKILL after the grace.
    spdlog::warn("job {}: {}; stopping the rest of the gang ({} ms to checkpoint)", e.job_id,
                 reason, c_.options.stop_grace_ms);
    attempt.failure = AttemptTracker::Failure{reason, user_error || clean_exit, !e.cause.empty(),
                                              /*from_exit=*/!e.status_unknown &&
                                                  (e.signal == 0 || e.signal == SIGPIPE) &&
                                                  e.killed_for.empty() && e.cause.empty(),
                                              c_.clock.NowMs() + c_.options.stop_grace_ms};
    c_.executor.Stop(e.job_id, c_.options.stop_grace_ms).IgnoreError();
    return;
  }
  EndAttempt(attempts, r, reason, user_error || clean_exit);
}

void LearnerExits::SettlePreempted(AttemptTracker& attempts, JobRecord& r, const LearnerExit& e) {
  if (int left = c_.executor.Unreaped(e.job_id); left > 0) {
    spdlog::info("job {}: preempted learner rank {} {}; waiting for {} more", e.job_id, e.rank,
                 e.Describe(), left);
    return;
  }
  attempts.EndAttempt(e.job_id);
  r.ClearGang(c_.clock.NowMs());
  absl::Status s = c_.recorder.Transition(
      r, JobState::kQueued,
      absl::StrCat("requeued after preemption (learner rank ", e.rank, " ", e.Describe(),
                   "); it resumes from its latest checkpoint"));
  if (!s.ok()) spdlog::error("job {}: {}", r.id, s.message());
}

void LearnerExits::SettleFailingGang(AttemptTracker& attempts, JobRecord& r, const LearnerExit& e) {
  // A gang whose learner failed: the survivors are checkpointing and stopping. The first exit may
  // be a peer's that stopped with the gang; one whose executor knows an outside cause (e.g. an
  // scancel) is why, and becomes the reason; so does, over a learner's own exit (or its death by
  // SIGPIPE, writing to the lost peer), one killed from outside (a signal other than the
  // executor's SIGTERM, before its SIGKILL is due) or for going over its limits (which fails the
  // job, as it would have first).
  AttemptTracker::Failure& recorded = *attempts.Of(e.job_id).failure;
  const bool killed_from_outside =
      !e.killed_for.empty() || (e.signal != 0 && e.signal != SIGTERM && e.signal != SIGPIPE &&
                                c_.clock.NowMs() < recorded.kill_at_ms);
  if ((!e.cause.empty() && !recorded.from_cause) ||
      (recorded.from_exit && e.cause.empty() && killed_from_outside)) {
    recorded.reason = absl::StrCat(MemberName(r, e.rank), " ", e.Describe());
    recorded.from_cause = !e.cause.empty();
    recorded.from_exit = false;
    recorded.fail_job = recorded.fail_job || !e.killed_for.empty();
  }
  if (int left = c_.executor.Unreaped(e.job_id); left > 0) {
    spdlog::info("job {}: learner rank {} {}; waiting for {} more of the failed gang", e.job_id,
                 e.rank, e.Describe(), left);
    return;
  }
  const AttemptTracker::Failure failure = recorded;
  EndAttempt(attempts, r, failure.reason, failure.fail_job);
}

void LearnerExits::Complete(AttemptTracker& attempts, JobRecord& r, const std::string& reason) {
  // Before the job's end is recorded: the search its end wakes starts trials that take them.
  KeepKernelChoices(c_.layout, r.tenant, r.id);
  attempts.EndAttempt(r.id);
  r.ClearGang(c_.clock.NowMs());
  // The other ranks are done training too; make sure none lingers.
  c_.executor.Stop(r.id, c_.options.stop_grace_ms).IgnoreError();
  auto models = c_.store.Models(r.id);
  bool has_final = false;
  if (models.ok()) {
    for (const auto& a : *models) has_final = has_final || a.kind == kFinalModel;
  }
  if (!has_final) return c_.recorder.Fail(r, "learner exited without committing a final model");
  // An experiment's trial that may be promoted (it checkpointed at the end) waits, HALTED, for
  // its search to train it on or stop it there; one that met the complete target is done.
  if (auto spec = c_.specs.Get(r);
      spec.ok() && !r.experiment.empty() && (*spec)->checkpoint.at_end && !r.complete_met_ms) {
    // It finished, so it trained its whole budget, whether or not its last report said so.
    r.progress.epoch = std::max(r.progress.epoch, (*spec)->training.epochs);
    absl::Status s =
        c_.recorder.Transition(r, JobState::kHalted,
                               absl::StrCat("trial ", r.trial, " of ", r.experiment,
                                            " trained its ", (*spec)->training.epochs, " epochs (",
                                            reason, "); it waits for the search to promote it"));
    if (!s.ok()) spdlog::error("job {}: {}", r.id, s.message());
    return;
  }
  absl::Status s = c_.recorder.Transition(r, JobState::kCompleted, reason);
  if (!s.ok()) spdlog::error("job {}: {}", r.id, s.message());
}

void LearnerExits::EndAttempt(AttemptTracker& attempts, JobRecord& r, const std::string& reason,
                              bool fail_job) {
  KeepKernelChoices(c_.layout, r.tenant, r.id);
  attempts.EndAttempt(r.id);
  r.ClearGang(c_.clock.NowMs());
  if (fail_job) return c_.recorder.Fail(r, reason);
  RestartOrFail(attempts, r, reason);
}

void LearnerExits::AbandonAttempt(AttemptTracker& attempts, JobRecord& r,
                                  const std::string& reason) {
  c_.executor.Stop(r.id, 0).IgnoreError();
  EndAttempt(attempts, r, reason, /*fail_job=*/false);
}

void LearnerExits::RestartOrFail(AttemptTracker& attempts, JobRecord& r,
                                 const std::string& reason) {
  auto spec = c_.specs.Get(r);
  const int max_restarts = spec.ok() ? (*spec)->max_restarts : 0;
  if (r.restarts >= max_restarts) {
    return c_.recorder.Fail(
        r, max_restarts == 0 ? reason
                             : absl::StrCat(reason, " (gave up after ", r.restarts, " restarts)"));
  }
  r.restarts += 1;
  MetricsRegistry::Global().Add(kRestartsMetric, {{"tenant", r.tenant}});
  int64_t backoff = c_.options.restart_backoff_ms << std::min(r.restarts - 1, 16);
  backoff = std::min(backoff, c_.options.restart_backoff_max_ms);
  auto checkpoints = c_.store.Checkpoints(r.id);
  std::string from = checkpoints.ok() && !checkpoints->empty()
                         ? absl::StrCat("from the checkpoint at step ", checkpoints->front().step)
                         : std::string("from the beginning (no checkpoint yet)");
  absl::Status s =
      c_.recorder.Transition(r, JobState::kQueued,
                             absl::StrFormat("%s; restart %d of %d %s in %.1f s", reason,
                                             r.restarts, max_restarts, from, backoff / 1000.0));
  if (!s.ok()) return spdlog::error("job {}: cannot requeue: {}", r.id, s.message());
  attempts.SetNotBefore(r.id, c_.clock.NowMs() + backoff);
}

void LearnerExits::CheckLiveness(AttemptTracker& attempts, std::vector<JobRecord>& jobs) {
  const TimeMs now = c_.clock.NowMs();
  for (JobRecord& r : jobs) {
    if (!RunsLearners(r.state)) continue;
    membership_.ReleaseLeavers(attempts, r, now);
    const AttemptTracker::Attempt* attempt = attempts.Find(r.id);
    if (attempt && attempt->failure) continue;  // already stopping
    const int64_t limit = r.state == JobState::kStarting ? c_.options.start_timeout_ms
                                                         : c_.options.heartbeat_timeout_ms;
    // The longest-silent learner of the gang (by id); one that has exited cleanly is no longer
    // watched.
    const int world = c_.specs.WorldSize(r);
    std::vector<int> ids;
    for (const LearnerSlot& l : r.learners) ids.push_back(l.id);
    if (ids.empty()) {
      for (int rank = 0; rank < world; ++rank) ids.push_back(rank);
    }
    int silent_rank = -1;
    TimeMs oldest = now;
    for (int rank : ids) {
      std::optional<TimeMs> seen;
      if (attempt) {
        if (auto it = attempt->last_seen_ms.find(rank); it != attempt->last_seen_ms.end()) {
          seen = it->second;
        }
      }
      if (!seen && r.state != JobState::kStarting) continue;
      if (seen.value_or(r.updated_ms) < oldest) {
        oldest = seen.value_or(r.updated_ms);
        silent_rank = rank;
      }
    }
    if (silent_rank < 0 || now - oldest <= limit) continue;
    const std::string silence = absl::StrFormat("stopped heartbeating (silent %.0f s)",
                                                static_cast<double>(now - oldest) / 1000.0);
    if (membership_.KillSilentMember(attempts, r, silent_rank, silence)) continue;
    spdlog::warn("job {}: learner rank {} silent for {} ms, stopping the job's learners", r.id,
                 silent_rank, now - oldest);
    AbandonAttempt(
        attempts, r,
        absl::StrCat("learner", world > 1 ? absl::StrCat(" rank ", silent_rank) : std::string(),
                     " ", silence));
  }
}

}  // namespace weft
