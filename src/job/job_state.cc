#include "job/job_state.h"

#include <array>

namespace weft {
namespace {
struct Entry {
  JobState state;
  const char* name;
};
constexpr std::array<Entry, 10> kNames = {{
    {JobState::kQueued, "QUEUED"},
    {JobState::kPlaced, "PLACED"},
    {JobState::kStarting, "STARTING"},
    {JobState::kRunning, "RUNNING"},
    {JobState::kDelivered, "DELIVERED"},
    {JobState::kCompleted, "COMPLETED"},
    {JobState::kFailed, "FAILED"},
    {JobState::kHalted, "HALTED"},
    {JobState::kPreempted, "PREEMPTED"},
    {JobState::kResuming, "RESUMING"},
}};
}  // namespace

const char* JobStateName(JobState s) {
  for (const auto& e : kNames) {
    if (e.state == s) return e.name;
  }
  return "UNKNOWN";
}

std::optional<JobState> ParseJobState(std::string_view name) {
  for (const auto& e : kNames) {
    if (name == e.name) return e.state;
  }
  return std::nullopt;
}

const std::vector<JobState>& AllJobStates() {
  static const std::vector<JobState> all = [] {
    std::vector<JobState> v;
    for (const auto& e : kNames) v.push_back(e.state);
    return v;
  }();
  return all;
}

bool CanTransition(JobState from, JobState to) {
  using S = JobState;
  switch (from) {
    case S::kQueued:
      return to == S::kPlaced || to == S::kHalted || to == S::kFailed;
    case S::kPlaced:
      return to == S::kStarting || to == S::kQueued || to == S::kHalted || to == S::kFailed;
    case S::kStarting:
      return to == S::kRunning || to == S::kQueued || to == S::kHalted || to == S::kFailed ||
             to == S::kPreempted;
    // RUNNING -> RUNNING and DELIVERED -> DELIVERED: an elastic job's membership changed in
    // place (a new generation), recorded in its history like a transition.
    case S::kRunning:
      return to == S::kRunning || to == S::kDelivered || to == S::kCompleted || to == S::kFailed ||
             to == S::kHalted || to == S::kPreempted || to == S::kQueued;
    case S::kDelivered:
      return to == S::kDelivered || to == S::kCompleted || to == S::kFailed || to == S::kHalted ||
             to == S::kPreempted || to == S::kQueued;
    case S::kPreempted:
      return to == S::kQueued;
    case S::kHalted:
      return to == S::kResuming;
    case S::kResuming:
      return to == S::kQueued || to == S::kFailed;
    case S::kCompleted:
    case S::kFailed:
      return false;
  }
  return false;
}

bool IsTerminal(JobState s) { return s == JobState::kCompleted || s == JobState::kFailed; }

bool IsSettled(JobState s) { return IsTerminal(s) || s == JobState::kHalted; }

bool RunsLearners(JobState s) {
  return s == JobState::kStarting || s == JobState::kRunning || s == JobState::kDelivered;
}

bool InQueue(JobState s) { return s == JobState::kQueued || s == JobState::kPreempted; }

bool AcceptsCheckpoints(JobState s) {
  return RunsLearners(s) || s == JobState::kHalted || s == JobState::kPreempted ||
         s == JobState::kQueued;
}

bool HoldsResources(JobState s) {
  return s == JobState::kPlaced || s == JobState::kStarting || s == JobState::kRunning ||
         s == JobState::kDelivered;
}

const char* ExperimentStateName(ExperimentState s) {
  switch (s) {
    case ExperimentState::kRunning:
      return "RUNNING";
    case ExperimentState::kHalted:
      return "HALTED";
    case ExperimentState::kCompleted:
      return "COMPLETED";
    case ExperimentState::kFailed:
      return "FAILED";
  }
  return "UNKNOWN";
}

std::optional<ExperimentState> ParseExperimentState(std::string_view name) {
  for (ExperimentState s : {ExperimentState::kRunning, ExperimentState::kHalted,
                            ExperimentState::kCompleted, ExperimentState::kFailed}) {
    if (name == ExperimentStateName(s)) return s;
  }
  return std::nullopt;
}

}  // namespace weft
