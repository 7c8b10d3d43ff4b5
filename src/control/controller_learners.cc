// The controller's side of the coordination service: learners register, report progress and
// metrics, commit checkpoints and models, and say how they finished. Every call names the
// attempt it belongs to; a stale attempt is refused (FailedPrecondition). What a learner reports
// is tenant input: a file it commits must be at the path weftd derives for it.
#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "control/controller.h"

namespace weft {
namespace {

// A file a learner says it made durable: it must be the one weftd derives (`expected`) and be
// `bytes` long. InvalidArgument otherwise.
absl::Status CheckCommittedFile(Env& env, const char* what, const std::string& reported,
                                const std::string& expected, int64_t bytes) {
  if (reported != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " path '", reported, "' is not ", expected));
  }
  // A regular file, reached without a link (Env::FileSize): the learner is the tenant's code.
  absl::StatusOr<int64_t> size = env.FileSize(expected);
  if (!size.ok() || *size != bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " file ", expected, " is missing or not ", bytes, " bytes"));
  }
  return absl::OkStatus();
}

// The GPU devices learner `id` of `r` was placed on against the ones it was `handed` (host
// indices): nullopt when they agree — or when the executor chose them itself (`chooses`: Slurm)
// and they are `per_learner` many, distinct: they are then written into r's slot (`*recorded`).
// Otherwise why the attempt cannot go on.
std::optional<std::string> GpusAgree(JobRecord& r, int id, std::vector<int> handed, bool chooses,
                                     int per_learner, bool* recorded) {
  auto slot = std::find_if(r.learners.begin(), r.learners.end(),
                           [id](const LearnerSlot& l) { return l.id == id; });
  if (slot == r.learners.end()) return std::nullopt;
  std::sort(handed.begin(), handed.end());
  if (handed == slot->gpus) return std::nullopt;
  const bool distinct = std::adjacent_find(handed.begin(), handed.end()) == handed.end();
  if (chooses && distinct && static_cast<int>(handed.size()) == per_learner) {
    slot->gpus = handed;
    *recorded = true;
    return std::nullopt;
  }
  auto list = [](const std::vector<int>& g) {
    return g.empty() ? std::string("none") : absl::StrCat("[", absl::StrJoin(g, ", "), "]");
  };
  return absl::StrCat("learner ", id, " was handed GPUs ", list(handed), " on node ", slot->node,
                      ", but weft placed it on ", list(slot->gpus),
                      chooses ? absl::StrCat(" (it needs ", per_learner, ")") : std::string(),
                      "; the executor did not give it its devices");
}

}  // namespace

RegisterDecision Controller::OnRegister(const std::string& id, int rank, int64_t attempt,
                                        int64_t pid, int world_size, const std::vector<int>& gpus) {
  absl::MutexLock lock(&mu_);
  auto rec = recorder_.CurrentAttempt(id, attempt, RunsLearners);
  if (absl::IsUnavailable(rec.status())) {
    return {false, std::string(rec.status().message()), {}, /*retry=*/true};
  }
  if (!rec.ok()) return {false, std::string(rec.status().message()), {}};
  JobRecord r = *rec;
  const int world = specs_.WorldSize(r);
  if (world_size != 0 && world_size != world) {
    return {false,
            absl::StrCat("this learner was started for a gang of ", world_size, "; the job has ",
                         world, " learner(s)"),
            {}};
  }
  // `rank` is the learner's id (its rank as started): one of the current members'.
  const bool member = r.learners.empty()
                          ? rank < world
                          : std::any_of(r.learners.begin(), r.learners.end(),
                                        [rank](const LearnerSlot& l) { return l.id == rank; });
  if (rank < 0 || !member) {
    return {false, absl::StrCat("rank ", rank, " is not in this job's gang of ", world), {}};
  }
  bool recorded = false;
  auto spec = specs_.Get(r);
  const int per_learner = spec.ok() ? (*spec)->resources.gpus : 0;
  if (auto wrong = GpusAgree(r, rank, gpus, executor_.ChoosesGpus(), per_learner, &recorded)) {
    exits_.AbandonAttempt(attempts_, r, *wrong);
    return {false, *wrong, {}};
  }
  if (recorded) {
    if (absl::Status s = store_.UpdateJob(r); !s.ok()) {
      return {false, std::string(s.message()), {}, /*retry=*/absl::IsUnavailable(s)};
    }
  }
  AttemptTracker::Attempt& a = attempts_.Of(id);
  a.last_seen_ms[rank] = clock_.NowMs();
  a.registered.insert(rank);
  RegisterDecision decision{true, "", {}};
  if (auto checkpoints = store_.Checkpoints(id); checkpoints.ok()) {
    for (const auto& c : *checkpoints) decision.resume_from.push_back(c.path);
  }
  if (r.state == JobState::kStarting && static_cast<int>(a.registered.size()) == world) {
    std::vector<int64_t> pids;
    for (const LearnerSlot& l : r.learners) pids.push_back(l.pid);
    absl::Status s = recorder_.Transition(
        r, JobState::kRunning,
        world == 1 ? absl::StrCat("learner rank ", rank, " registered (pid ", pid, ")")
                   : absl::StrCat("all ", world, " learners registered (pids ",
                                  absl::StrJoin(pids, ", "), ")"));
    if (!s.ok()) return {false, std::string(s.message()), {}};
  }
  return decision;
}

ReportAnswer Controller::OnHeartbeat(const std::string& id, int rank, int64_t attempt,
                                     const JobProgress& progress) {
  return OnMetrics(id, rank, attempt, {}, progress);
}

ReportAnswer Controller::OnMetrics(const std::string& id, int rank, int64_t attempt,
                                   const std::vector<MetricRecord>& points,
                                   const JobProgress& progress) {
  absl::MutexLock lock(&mu_);
  auto rec = recorder_.CurrentAttempt(id, attempt, RunsLearners);
  if (absl::IsUnavailable(rec.status())) return ReportAnswer::kRetry;
  if (!rec.ok()) return ReportAnswer::kStop;
  JobRecord r = *rec;
  attempts_.Of(id).last_seen_ms[rank] = clock_.NowMs();
  // The job's metrics are its current rank 0's (the first learner; `rank` is the caller's id).
  if (rank != (r.learners.empty() ? 0 : r.learners[0].id)) return ReportAnswer::kKeepRunning;
  if (!points.empty()) {
    absl::Status s = store_.AppendMetrics(id, points);
    // The learner keeps the points and sends them again: none is lost (nor stored twice, unless
    // the connection broke during the commit itself).
    if (absl::IsUnavailable(s)) return ReportAnswer::kRetry;
    if (!s.ok()) spdlog::error("job {}: cannot store metrics: {}", id, s.message());
    for (const MetricRecord& m : points) {
      if (m.test_accuracy && std::isfinite(*m.test_accuracy) &&
          (!r.best_test_accuracy || *m.test_accuracy > *r.best_test_accuracy)) {
        r.best_test_accuracy = m.test_accuracy;
      }
    }
  }
  if (auto spec = specs_.Get(r); spec.ok()) models_.Observe(r, **spec, points, progress);
  if (progress.steps_total > 0) r.progress = progress;
  absl::Status s = store_.UpdateJob(r);
  if (!s.ok()) {
    spdlog::error("job {}: cannot store progress: {}", id, s.message());
    return ReportAnswer::kKeepRunning;  // the next report carries it again
  }
  recorder_.Progressed(r, points);
  return ReportAnswer::kKeepRunning;
}

absl::Status Controller::OnCommitModel(const std::string& id, int64_t attempt,
                                       const ModelRecord& model) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(JobRecord r, recorder_.CurrentAttempt(id, attempt, RunsLearners));
  if (!IsModelKind(model.kind)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown model kind '", model.kind, "'"));
  }
  const std::string results = layout_.ResultDir(id);
  RETURN_IF_ERROR(
      CheckCommittedFile(env_, "model", model.path, ModelPath(results, model.kind), model.bytes));
  if (model.card_path != ModelCardPath(results, model.kind)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model card path '", model.card_path, "' is not ", ModelCardPath(results, model.kind)));
  }
  ModelRecord a = model;
  a.created_ms = clock_.NowMs();
  RETURN_IF_ERROR(store_.PutModel(id, a));
  recorder_.ModelCommitted(r, a);
  ASSIGN_OR_RETURN(SpecCache::SpecPtr spec, specs_.Get(r));
  if (model.kind == kDeliveredModel) models_.MarkDelivered(id);
  if (model.kind == kDeliveredModel && !r.deliver_met_ms) {
    r.deliver_met_ms = a.created_ms;
    RETURN_IF_ERROR(store_.UpdateJob(r));
    if (r.state == JobState::kRunning) {
      RETURN_IF_ERROR(recorder_.Transition(
          r, JobState::kDelivered,
          absl::StrFormat("deliver target met: test_accuracy %.4f >= %g; model delivered",
                          model.test_accuracy, spec->targets.deliver.value_or(0))));
    }
  }
  if (model.kind == kFinalModel && spec->targets.complete &&
      model.test_accuracy >= *spec->targets.complete && !r.complete_met_ms) {
    r.complete_met_ms = a.created_ms;
    RETURN_IF_ERROR(store_.UpdateJob(r));
  }
  return absl::OkStatus();
}

absl::Status Controller::OnCommitCheckpoint(const std::string& id, int64_t attempt,
                                            const CheckpointRecord& checkpoint) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(JobRecord r, recorder_.CurrentAttempt(id, attempt, AcceptsCheckpoints));
  RETURN_IF_ERROR(CheckCommittedFile(env_, "checkpoint", checkpoint.path,
                                     CheckpointPath(layout_.CheckpointDir(id), checkpoint.step),
                                     checkpoint.bytes));
  CheckpointRecord c = checkpoint;
  c.created_ms = clock_.NowMs();
  RETURN_IF_ERROR(store_.PutCheckpoint(id, c));
  MetricsRegistry::Global().Add(kCheckpointsMetric, {{"tenant", r.tenant}});
  MetricsRegistry::Global().Add(kCheckpointBytesMetric, {{"tenant", r.tenant}},
                                static_cast<double>(std::max<int64_t>(c.bytes, 0)));
  // Reported by the learner: a value no write can take is left out rather than trusted.
  if (std::isfinite(c.write_seconds) && c.write_seconds > 0 && c.write_seconds < 86400) {
    MetricsRegistry::Global().Observe(kCheckpointSecondsMetric, {{"tenant", r.tenant}},
                                      c.write_seconds);
  }
  attempts_.Of(id).last_seen_ms[0] = c.created_ms;  // rank 0 writes the checkpoints
  ASSIGN_OR_RETURN(SpecCache::SpecPtr spec, specs_.Get(r));
  ASSIGN_OR_RETURN(std::vector<CheckpointRecord> all, store_.Checkpoints(id));
  for (size_t i = static_cast<size_t>(spec->checkpoint.keep); i < all.size(); ++i) {
    // Forget it first, then delete the file: a crash in between leaves a stray file, never a
    // registered checkpoint without its file.
    RETURN_IF_ERROR(store_.DeleteCheckpoint(id, all[i].step));
    if (absl::Status s = env_.RemoveFile(all[i].path); !s.ok()) {
      spdlog::warn("job {}: {}", id, s.message());
    }
  }
  return absl::OkStatus();
}

absl::Status Controller::OnFinished(const std::string& id, int rank, int64_t attempt,
                                    bool succeeded, const std::string& reason) {
  absl::MutexLock lock(&mu_);
  absl::Status current = recorder_.CurrentAttempt(id, attempt, RunsLearners).status();
  if (absl::IsUnavailable(current)) return current;
  if (current.ok()) attempts_.Of(id).finished[rank] = {succeeded, reason};
  return absl::OkStatus();
}

absl::StatusOr<RegroupDecision> Controller::OnRegroup(const std::string& id, int learner_id,
                                                      int64_t attempt, int64_t generation) {
  bool undecided = false;
  absl::StatusOr<RegroupDecision> d;
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<JobRecord> r = recorder_.CurrentAttempt(id, attempt, RunsLearners);
    if (absl::IsUnavailable(r.status())) return r.status();
    if (!r.ok()) {
      RegroupDecision stop;
      stop.kind = RegroupDecision::Kind::kStop;
      stop.reason = std::string(r.status().message());
      return stop;
    }
    d = membership_.Answer(attempts_, *r, learner_id, generation, &undecided);
  }
  // Not decided yet: the loss this learner saw is most likely an exit weftd has not reaped;
  // a round now reaps it rather than up to schedule_interval_ms later.
  if (undecided) loop_.Wake();
  return d;
}

int64_t Controller::Generation(const std::string& id) {
  absl::MutexLock lock(&mu_);
  return ElasticMembership::Announced(attempts_, id);
}

bool Controller::NewcomersStarting(const std::string& id) {
  absl::MutexLock lock(&mu_);
  return ElasticMembership::NewcomersStarting(attempts_, id);
}

}  // namespace weft
