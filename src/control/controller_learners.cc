// The controller's side of the coordination service: learners register, report progress and
// metrics, commit checkpoints and models, and say how they finished. Every call names the
// attempt it belongs to; a stale attempt is refused (FailedPrecondition).
#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "control/controller.h"
#include "control/controller_internal.h"

namespace weft {

using control_internal::SpecOf;

absl::StatusOr<JobRecord> Controller::CurrentAttemptLocked(const std::string& id,
                                                           int64_t attempt) {
  ASSIGN_OR_RETURN(JobRecord r, store_.GetJob(id));
  if (r.attempt != attempt) {
    return absl::FailedPreconditionError(
        absl::StrCat("attempt ", attempt, " is stale; the job is at attempt ", r.attempt));
  }
  if (!RunsLearners(r.state)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job is ", JobStateName(r.state), ", not running"));
  }
  return r;
}

RegisterDecision Controller::OnRegister(const std::string& id, int rank, int64_t attempt,
                                        int64_t pid) {
  std::lock_guard<std::mutex> lock(mu_);
  auto rec = CurrentAttemptLocked(id, attempt);
  if (!rec.ok()) return {false, std::string(rec.status().message()), {}};
  JobRecord r = *rec;
  const int world = std::max<int>(1, static_cast<int>(r.learners.size()));
  if (rank < 0 || rank >= world) {
    return {false, absl::StrCat("rank ", rank, " is not in this job's gang of ", world), {}};
  }
  last_seen_ms_[id][rank] = clock_.NowMs();
  registered_[id].insert(rank);
  RegisterDecision decision{true, "", {}};
  auto checkpoints = store_.Checkpoints(id);
  if (checkpoints.ok()) {
    for (const auto& c : *checkpoints) decision.resume_from.push_back(c.path);
  }
  if (r.state == JobState::kStarting && static_cast<int>(registered_[id].size()) == world) {
    std::vector<int64_t> pids;
    for (const LearnerSlot& l : r.learners) pids.push_back(l.pid);
    absl::Status s = TransitionLocked(
        r, JobState::kRunning,
        world == 1 ? absl::StrCat("learner rank ", rank, " registered (pid ", pid, ")")
                   : absl::StrCat("all ", world, " learners registered (pids ",
                                  absl::StrJoin(pids, ", "), ")"));
    if (!s.ok()) return {false, std::string(s.message()), {}};
  }
  return decision;
}

bool Controller::OnHeartbeat(const std::string& id, int rank, int64_t attempt,
                             const JobProgress& progress) {
  return OnMetrics(id, rank, attempt, {}, progress);
}

bool Controller::OnMetrics(const std::string& id, int rank, int64_t attempt,
                           const std::vector<MetricRecord>& points, const JobProgress& progress) {
  std::lock_guard<std::mutex> lock(mu_);
  auto rec = CurrentAttemptLocked(id, attempt);
  if (!rec.ok()) return false;
  JobRecord r = *rec;
  last_seen_ms_[id][rank] = clock_.NowMs();
  if (rank != 0) return true;  // the job's metrics and progress are rank 0's
  if (!points.empty()) {
    absl::Status s = store_.AppendMetrics(id, points);
    if (!s.ok()) spdlog::error("job {}: cannot store metrics: {}", id, s.message());
    for (const MetricRecord& m : points) {
      if (m.test_accuracy && (!r.best_test_accuracy || *m.test_accuracy > *r.best_test_accuracy)) {
        r.best_test_accuracy = m.test_accuracy;
      }
    }
  }
  if (progress.steps_total > 0) r.progress = progress;
  absl::Status s = store_.UpdateJob(r);
  if (!s.ok()) spdlog::error("job {}: cannot store progress: {}", id, s.message());
  return true;
}

absl::Status Controller::OnCommitArtifact(const std::string& id, int64_t attempt,
                                          const ArtifactRecord& artifact) {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(JobRecord r, CurrentAttemptLocked(id, attempt));
  if (!IsModelKind(artifact.kind)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown model kind '", artifact.kind, "'"));
  }
  if (!absl::StartsWith(artifact.path, JobDir(id) + "/")) {
    return absl::InvalidArgumentError("model path is outside the job's directory");
  }
  absl::StatusOr<int64_t> size = FileSize(artifact.path);
  if (!size.ok() || *size != artifact.bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("model file ", artifact.path, " is missing or not ", artifact.bytes, " bytes"));
  }
  ArtifactRecord a = artifact;
  a.created_ms = clock_.NowMs();
  RETURN_IF_ERROR(store_.PutArtifact(id, a));
  ASSIGN_OR_RETURN(JobSpec spec, SpecOf(r));
  if (artifact.kind == kDeliveredModel && !r.deliver_met_ms) {
    r.deliver_met_ms = a.created_ms;
    RETURN_IF_ERROR(store_.UpdateJob(r));
    if (r.state == JobState::kRunning) {
      RETURN_IF_ERROR(TransitionLocked(
          r, JobState::kDelivered,
          absl::StrFormat("deliver target met: test_accuracy %.4f >= %g; model delivered",
                          artifact.test_accuracy, spec.targets.deliver.value_or(0))));
    }
  }
  if (artifact.kind == kFinalModel && spec.targets.complete &&
      artifact.test_accuracy >= *spec.targets.complete && !r.complete_met_ms) {
    r.complete_met_ms = a.created_ms;
    RETURN_IF_ERROR(store_.UpdateJob(r));
  }
  return absl::OkStatus();
}

absl::Status Controller::OnCommitCheckpoint(const std::string& id, int64_t attempt,
                                            const CheckpointRecord& checkpoint) {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(JobRecord r, store_.GetJob(id));
  if (r.attempt != attempt) {
    return absl::FailedPreconditionError(
        absl::StrCat("attempt ", attempt, " is stale; the job is at attempt ", r.attempt));
  }
  if (!AcceptsCheckpoints(r.state)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job is ", JobStateName(r.state), ", not running"));
  }
  if (!absl::StartsWith(checkpoint.path, JobDir(id) + "/")) {
    return absl::InvalidArgumentError("checkpoint path is outside the job's directory");
  }
  absl::StatusOr<int64_t> size = FileSize(checkpoint.path);
  if (!size.ok() || *size != checkpoint.bytes) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint ", checkpoint.path,
                                                   " is missing or not ", checkpoint.bytes,
                                                   " bytes"));
  }
  CheckpointRecord c = checkpoint;
  c.created_ms = clock_.NowMs();
  RETURN_IF_ERROR(store_.PutCheckpoint(id, c));
  last_seen_ms_[id][0] = c.created_ms;  // rank 0 writes the checkpoints
  ASSIGN_OR_RETURN(JobSpec spec, SpecOf(r));
  ASSIGN_OR_RETURN(std::vector<CheckpointRecord> all, store_.Checkpoints(id));
  for (size_t i = static_cast<size_t>(spec.checkpoint.keep); i < all.size(); ++i) {
    // Forget it first, then delete the file: a crash in between leaves a stray file, never a
    // registered checkpoint without its file.
    RETURN_IF_ERROR(store_.DeleteCheckpoint(id, all[i].step));
    std::remove(all[i].path.c_str());
  }
  return absl::OkStatus();
}

void Controller::OnFinished(const std::string& id, int rank, int64_t attempt, bool succeeded,
                            const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!CurrentAttemptLocked(id, attempt).ok()) return;
  finished_[id][rank] = {succeeded, reason};
}

}  // namespace weft
