// The control loop's round (Tick): reap the executor's exits and settle them, check liveness,
// schedule; and, every disk_check_interval_ms, the disk quotas. ControlLoop runs it every
// schedule_interval_ms, or sooner when woken.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "common/logging.h"
#include "control/controller.h"

namespace weft {

void Controller::StartLoop() { loop_.Start(); }

void Controller::StopLoop() { loop_.Stop(); }

void Controller::LoopRound() {
  Tick();
  const TimeMs now = clock_.NowMs();
  if (disk_checked_ms_ == 0) disk_checked_ms_ = now;
  if (now - disk_checked_ms_ >= options_.disk_check_interval_ms) {
    EnforceDiskQuotas();
    disk_checked_ms_ = clock_.NowMs();
  }
}

void Controller::Tick() {
  // One round at a time; the job lock is held for the reads before the policy and the writes
  // after it, never while the policy decides, so learners' reports are answered meanwhile.
  absl::MutexLock round_lock(&round_mu_);
  const auto start = std::chrono::steady_clock::now();
  std::vector<LearnerExit> reaped = executor_.Reap();
  absl::StatusOr<std::vector<JobRecord>> jobs;
  SchedulingRound::Inputs inputs;
  {
    absl::MutexLock lock(&mu_);
    // Exits an earlier round could not settle (the store was unreachable) go first, in order.
    std::vector<LearnerExit> exits = std::exchange(unsettled_exits_, {});
    exits.insert(exits.end(), reaped.begin(), reaped.end());
    // When several learners of a gang end in one round, the cause goes first: a learner killed
    // by a signal, then one that failed or died writing to a lost peer (SIGPIPE), then the rest
    // (its peers exit because it is gone).
    auto severity = [](const LearnerExit& e) {
      if (e.signal != 0 && e.signal != SIGPIPE) return 0;
      return e.signal == SIGPIPE || (!e.status_unknown && e.exit_code != 0) ? 1 : 2;
    };
    std::stable_sort(exits.begin(), exits.end(), [&](const LearnerExit& a, const LearnerExit& b) {
      return severity(a) < severity(b);
    });
    for (const LearnerExit& e : exits) {
      if (!exits_.Settle(attempts_, e)) unsettled_exits_.push_back(e);  // settled later
    }
    jobs = store_.ListActiveJobs();
    if (!jobs.ok()) {
      if (!std::exchange(store_unreachable_, true)) {
        spdlog::error("control rounds paused until the store answers: {}", jobs.status().message());
      }
      return;
    }
    if (store_unreachable_) {
      // Learners' reports were turned away meanwhile: their silence does not count against them.
      spdlog::info("the store answers again; control rounds resume");
      attempts_.HeardFromAllAt(clock_.NowMs());
      store_unreachable_ = false;
    }
    exits_.CheckLiveness(attempts_, *jobs);
    inputs = SchedulingRound::InputsOf(attempts_);
  }
  const auto active = static_cast<int64_t>(jobs->size());
  SchedulingRound::Plan plan = round_.Decide(std::move(inputs), *std::move(jobs));
  {
    absl::MutexLock lock(&mu_);
    round_.Apply(attempts_, std::move(plan));
  }
  view_.RecordRound(
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count(),
      active);
}

}  // namespace weft
