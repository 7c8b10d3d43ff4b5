// The job lifecycle (FfDL's states, extended): the state names, which transitions are legal,
// and which states are terminal. It lives beside the manifest because the store, the scheduler
// and the controller all speak it; the controller (src/control/) is the only one that drives it.
//
//   QUEUED -> PLACED -> STARTING -> RUNNING -> (DELIVERED) -> COMPLETED | FAILED | HALTED
//   PREEMPTED -> QUEUED, HALTED -> RESUMING -> QUEUED; an active job may be requeued.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace weft {

enum class JobState {
  kQueued,
  kPlaced,
  kStarting,
  kRunning,
  kDelivered,
  kCompleted,
  kFailed,
  kHalted,
  kPreempted,
  kResuming,
};

// Upper-case name as shown in the API, e.g. "DELIVERED".
const char* JobStateName(JobState s);
// Inverse of JobStateName; nullopt for an unknown name.
std::optional<JobState> ParseJobState(std::string_view name);
// Every state, in lifecycle order.
const std::vector<JobState>& AllJobStates();

// True if `from -> to` is a legal transition.
bool CanTransition(JobState from, JobState to);
// The state predicates every room asks; nothing else defines "is this job over".
//
// COMPLETED and FAILED: nothing happens to the job any more.
bool IsTerminal(JobState s);
// COMPLETED, FAILED and HALTED: nothing happens to the job until a person acts (a halted job
// waits for `resume`). Log streams and `weft follow` end here.
bool IsSettled(JobState s);
// PLACED, STARTING, RUNNING, DELIVERED: the job holds cluster resources.
bool HoldsResources(JobState s);
// STARTING, RUNNING, DELIVERED: the job's learners are (or should be) alive and reporting.
bool RunsLearners(JobState s);
// QUEUED and PREEMPTED: in the queue (a preempted job checkpoints, then goes back to QUEUED).
bool InQueue(JobState s);
// RUNNING learners, or a job just halted or preempted, or queued again (resumed right after a
// halt): the learners of its current attempt may still commit the checkpoint they write on the
// way out, and the next attempt starts only once they are gone.
bool AcceptsCheckpoints(JobState s);

// An experiment's lifecycle (job/job.h ExperimentRecord): RUNNING while its search goes on;
// COMPLETED when the search is done or its complete target was met; HALTED by a person (its
// trials halted with it, resumed with it); FAILED when the search cannot go on.
enum class ExperimentState { kRunning, kHalted, kCompleted, kFailed };

// Upper-case name as shown in the API, e.g. "RUNNING".
const char* ExperimentStateName(ExperimentState s);
// Inverse of ExperimentStateName; nullopt for an unknown name.
std::optional<ExperimentState> ParseExperimentState(std::string_view name);

}  // namespace weft
