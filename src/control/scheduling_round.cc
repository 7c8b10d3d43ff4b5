// SchedulingRound: the policy's decisions, checked and applied (control/scheduling_round.h).
#include "control/scheduling_round.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/metrics.h"
#include "control/controller_options.h"
#include "scheduler/decision_check.h"
#include "scheduler/devices.h"

namespace weft {

SchedulingRound::Inputs SchedulingRound::InputsOf(const AttemptTracker& attempts) {
  return {attempts.not_before(), attempts.Leavers()};
}

SchedulingRound::Plan SchedulingRound::Decide(Inputs inputs, std::vector<JobRecord> jobs) {
  Plan plan;
  plan.jobs = std::move(jobs);
  std::map<std::string, int> stopping;
  for (const JobRecord& r : plan.jobs) {
    if (r.state != JobState::kQueued) continue;
    if (int left = p_.executor.Running(r.id); left > 0) stopping[r.id] = left;
  }
  p_.view.SetLeaving(std::move(inputs.leaving));
  plan.round = p_.view.ForRound(plan.jobs, inputs.not_before, stopping, p_.clock.NowMs());
  plan.waiting = plan.round.held;
  const auto& queued = plan.round.snapshot.jobs;
  // A round is due when a job waits, or a running elastic job could grow into idle capacity.
  auto due = [](const scheduler::JobRequest& j) {
    return j.Waiting() || static_cast<int>(j.allocation.size()) < j.max_learners;
  };
  if (std::none_of(queued.begin(), queued.end(), due)) return plan;
  const auto t0 = std::chrono::steady_clock::now();
  scheduler::Decisions d = p_.policy.Schedule(plan.round.snapshot);
  MetricsRegistry::Global().Observe(
      kRoundMetric, {{"policy", p_.policy.Name()}},
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  // weftd keeps a preempted job's nodes until its learners have checkpointed and exited: a round
  // that assumes otherwise is refused whole. Only elastic jobs are ever resized (the check holds
  // every placement to the job's range).
  absl::Status ok = scheduler::CheckDecisions(
      plan.round.snapshot, d,
      {plan.round.snapshot.preemption_frees_at_once, /*allow_resize=*/true});
  // Then each learner it places gets its GPU devices (none for a job without GPUs).
  if (ok.ok()) ok = scheduler::AssignGpus(plan.round.snapshot, &d);
  if (!ok.ok()) {
    std::string refusal = absl::StrCat("policy ", p_.policy.Name(), " ", ok.message());
    if (refusal != last_refusal_) {
      spdlog::error("scheduling round refused, nothing of it applied: {}", refusal);
    }
    last_refusal_ = refusal;
    for (const auto& j : queued) {
      if (j.Waiting()) {
        plan.waiting[j.job_id] = {
            j.job_id, scheduler::WaitCode::kNextRound,
            absl::StrCat("waiting: weftd refused the scheduler's decision (", refusal, ")")};
      }
    }
    return plan;
  }
  last_refusal_.clear();
  for (const scheduler::Waiting& w : d.waiting) plan.waiting[w.job_id] = w;
  plan.decisions = std::move(d);
  return plan;
}

bool SchedulingRound::StillAsPlanned(const scheduler::Decisions& d, ClusterView::Round& round) {
  std::vector<std::string> named = d.preempted;
  for (const scheduler::Placement& p : d.placements) named.push_back(p.job_id);
  for (const std::string& id : named) {
    JobRecord& planned = round.jobs.at(id);
    absl::StatusOr<JobRecord> now = p_.store.GetJob(id);
    if (!now.ok() || now->state != planned.state || now->attempt != planned.attempt ||
        now->generation != planned.generation || now->learners != planned.learners ||
        now->servers != planned.servers) {
      spdlog::info(
          "scheduling round dropped: job {} {} while the round was decided; the next "
          "round decides again",
          id, now.ok() ? "changed" : "could not be read");
      return false;
    }
    planned = *std::move(now);
  }
  return true;
}

void SchedulingRound::Apply(AttemptTracker& attempts, Plan plan) {
  p_.recorder.Waiting(plan.waiting, plan.jobs);
  p_.view.SetWaiting(std::move(plan.waiting));
  if (!plan.decisions || !StillAsPlanned(*plan.decisions, plan.round)) return;
  const scheduler::Decisions& d = *plan.decisions;
  for (const std::string& id : d.preempted) {
    auto why = d.preempt_reasons.find(id);
    Preempt(plan.round.jobs.at(id),
            why != d.preempt_reasons.end()
                ? absl::StrCat(why->second, "; checkpointing before it goes back to the queue")
                : absl::StrCat("preempted by the ", p_.policy.Name(),
                               " policy for a higher-priority job or a tenant below its "
                               "fair share; checkpointing before it goes back to the queue"));
  }
  for (const scheduler::Placement& p : d.placements) {
    const JobRecord& r = plan.round.jobs.at(p.job_id);
    if (r.state == JobState::kQueued) {
      p_.starter.Start(attempts, r, p);
    } else {
      Resize(attempts, r, p);
    }
  }
}

void SchedulingRound::Resize(AttemptTracker& attempts, const JobRecord& r,
                             const scheduler::Placement& p) {
  const bool grow = p.learner_nodes.size() > r.learners.size();
  // A scale-out parameter-server job's gang lists its servers after its learners.
  if (p.learner_nodes.size() == r.learners.size() + r.servers.size()) return;
  // A gang still starting cannot checkpoint yet: its grow waits for a round after it runs.
  if (grow && r.state != JobState::kRunning) return;
  // An elastic job's learners let newcomers join, and let learners leave, in place.
  if (grow && p_.membership.Grow(attempts, r, p)) return;
  if (!grow && p_.membership.Shrink(attempts, r, p)) return;
  Preempt(r, absl::StrCat(p.reason.empty() ? (grow ? "grow" : "shrink") : p.reason,
                          "; checkpointing, then it restarts with the learners that fit"));
}

void SchedulingRound::Preempt(JobRecord r, const std::string& reason) {
  if (!RunsLearners(r.state)) return;  // PLACED: its learners are being started this round
  absl::Status s = p_.recorder.Transition(r, JobState::kPreempted, reason);
  if (!s.ok()) {
    spdlog::error("job {}: {}", r.id, s.message());
    return;
  }
  spdlog::info("job {}: preempted, stopping its learners with {} ms to checkpoint", r.id,
               p_.stop_grace_ms);
  p_.executor.Stop(r.id, p_.stop_grace_ms).IgnoreError();
}

}  // namespace weft
