// Recovery: every active job brought in line with what still runs after a weftd restart
// (control/recovery.h).
#include "control/recovery.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "job/layout.h"

namespace weft {

bool Recovery::AdoptGang(AttemptTracker& attempts, JobRecord& r) {
  auto spec = c_.specs.Get(r);
  if (!spec.ok() || r.learners.empty()) return false;
  for (const LearnerSlot& l : r.learners) {
    if (l.pid <= 0) return false;  // never started
  }
  for (const ServerSlot& l : r.servers) {
    if (l.pid <= 0) return false;
  }
  if (r.servers.empty() && membership_.InPlace(r)) return AdoptSurvivors(attempts, r, **spec);
  // The learners, then a scale-out parameter-server job's servers.
  const size_t gang = r.learners.size() + r.servers.size();
  size_t taken = 0;
  for (; taken < gang; ++taken) {
    const int i = static_cast<int>(taken);
    const bool learner = taken < r.learners.size();
    const int world = static_cast<int>(r.learners.size());
    absl::Status s =
        learner
            ? c_.executor.Adopt(c_.launches.Learner(r, **spec, i), r.learners[taken].pid)
            : c_.executor.Adopt(c_.launches.Server(r, **spec, i - world), r.servers[i - world].pid);
    if (!s.ok()) break;
  }
  if (taken == gang) return true;
  // Part of the gang is gone: the rest cannot train alone.
  if (taken > 0) c_.executor.Stop(r.id, 0).IgnoreError();
  return false;
}

bool Recovery::AdoptSurvivors(AttemptTracker& attempts, JobRecord& r, const JobSpec& spec) {
  std::vector<LearnerSlot> survivors;
  std::vector<int> lost;
  for (size_t i = 0; i < r.learners.size(); ++i) {
    if (c_.executor.Adopt(c_.launches.Learner(r, spec, static_cast<int>(i)), r.learners[i].pid)
            .ok()) {
      survivors.push_back(r.learners[i]);
    } else {
      lost.push_back(r.learners[i].id);
    }
  }
  if (lost.empty()) return true;
  // The survivors' collective failed when the learner went; they keep asking weftd to regroup
  // (for a minute) and are answered with the generation recorded here.
  const size_t n = lost.size();
  const std::string reason = absl::StrCat("learner", n == 1 ? " " : "s ", absl::StrJoin(lost, ", "),
                                          n == 1 ? " was" : " were", " gone when weftd restarted (",
                                          n == 1 ? "its" : "their", " exit was not seen)");
  const int min = std::max(1, spec.resources.min_learners);
  const bool any = !survivors.empty();
  if (static_cast<int>(survivors.size()) >= min &&
      membership_.NextGeneration(attempts, r, std::move(survivors), reason)) {
    spdlog::info("job {}: {}; the others go on in generation {}", r.id, reason, r.generation);
    return true;
  }
  if (any) c_.executor.Stop(r.id, 0).IgnoreError();
  return false;
}

bool Recovery::FinishedUnseen(const JobRecord& r, std::string* reason) {
  if (r.state != JobState::kRunning && r.state != JobState::kDelivered) return false;
  auto models = c_.store.Models(r.id);
  auto history = c_.store.History(r.id);
  if (!models.ok() || !history.ok()) return false;
  // Only a final model of the current attempt says its training ended: one an earlier attempt
  // committed before it failed does not.
  TimeMs started = 0;
  for (const StateEvent& e : *history) {
    if (e.to == JobState::kStarting) started = e.time_ms;
  }
  for (const ModelRecord& m : *models) {
    if (m.kind != kFinalModel || m.created_ms < started) continue;
    *reason = absl::StrFormat(
        "training ended before weftd restarted: its final model (epoch %d, test_accuracy %.4f) "
        "is committed; the learners' exit was not seen",
        m.epoch, m.test_accuracy);
    return true;
  }
  return false;
}

absl::Status Recovery::Recover(AttemptTracker& attempts) {
  ASSIGN_OR_RETURN(std::vector<JobRecord> jobs, c_.store.ListActiveJobs());
  int requeued = 0, adopted = 0, completed = 0;
  for (JobRecord& r : jobs) {
    if (auto spec = c_.specs.Get(r); !spec.ok()) spdlog::error("{}", spec.status().message());
    const bool preempted = r.state == JobState::kPreempted;
    if (!HoldsResources(r.state) && !preempted) continue;
    // Learners of the current attempt that outlived the previous weftd keep training (or, if
    // their job was being preempted, are told again to checkpoint and stop).
    if (AdoptGang(attempts, r)) {
      if (preempted) {
        c_.executor.Stop(r.id, c_.options.stop_grace_ms).IgnoreError();
        continue;
      }
      AttemptTracker::Attempt& attempt = attempts.Of(r.id);
      attempt.generation = r.generation;
      for (const LearnerSlot& l : r.learners) {
        attempt.last_seen_ms[l.id] = c_.clock.NowMs();
        attempt.registered.insert(l.id);
      }
      spdlog::info("job {}: adopted learner pid {} of attempt {} ({} learner(s) in all)", r.id,
                   r.learners[0].pid, r.attempt, r.learners.size());
      adopted += static_cast<int>(r.learners.size());
      continue;
    }
    // Its learners are gone. Those that finished training committed the final model first; the
    // previous weftd may have died between their ReportFinished (held in memory) and their exits.
    if (std::string reason; FinishedUnseen(r, &reason)) {
      exits_.Complete(attempts, r, reason);
      ++completed;
      continue;
    }
    // Otherwise (or never started): requeue. A straggler of this attempt is fenced off by the
    // attempt number and stops at its next heartbeat.
    r.ClearGang(c_.clock.NowMs());
    RETURN_IF_ERROR(c_.recorder.Transition(
        r, JobState::kQueued,
        absl::StrCat("requeued: the learners of attempt ", r.attempt,
                     " are gone after a weftd restart; it resumes from its latest checkpoint")));
    ++requeued;
  }
  // A job halted mid-resume is put back in the queue.
  for (JobRecord& r : jobs) {
    if (r.state == JobState::kResuming) {
      RETURN_IF_ERROR(c_.recorder.Transition(r, JobState::kQueued, "resumed"));
    }
  }
  spdlog::info(
      "recovered {} active jobs from the store ({} learners adopted, {} jobs completed, {} jobs "
      "requeued)",
      jobs.size(), adopted, completed, requeued);
  RemoveDeletedJobsFiles();
  return absl::OkStatus();
}

void Recovery::RemoveDeletedJobsFiles() {
  namespace fs = std::filesystem;
  // Subdirectories, by name: tenants', then their jobs'.
  auto subdirectories = [](const std::string& dir) {
    std::vector<std::string> names;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->is_directory(ec) && !it->is_symlink(ec)) names.push_back(it->path().filename());
    }
    return names;
  };
  int removed = 0, left = 0;
  for (const std::string& tenant : subdirectories(c_.layout.DeletedDir(""))) {
    for (const std::string& id : subdirectories(c_.layout.DeletedDir(tenant))) {
      // A delete cut short before the store forgot the job: the job is still there to delete.
      if (!absl::IsNotFound(c_.store.GetJob(id).status())) continue;
      absl::Status s = c_.env.RemoveAll(absl::StrCat(c_.layout.DeletedDir(tenant), "/", id));
      if (s.ok()) {
        ++removed;
      } else {
        ++left;
        spdlog::warn("the files of deleted job {} of tenant {} are not all removed: {}", id, tenant,
                     s.message());
      }
    }
  }
  if (removed + left > 0) {
    spdlog::info("removed the files left of {} deleted jobs ({} still left)", removed, left);
  }
}

}  // namespace weft
