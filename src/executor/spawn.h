// Starting one learner process: fork + exec, with what must hold from its first instruction on
// done in the child before exec — its memory cgroup (so the kernel counts it from the first
// byte), its CPUs, a network namespace to join, a session of its own (no controlling terminal: a
// learner cannot push keystrokes into the terminal weftd was started from), every signal at its
// default and unblocked (except SIGTERM with ignore_sigterm), and its log.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace weft {

struct SpawnRequest {
  std::vector<std::string> argv;  // argv[0] is the program's path (no PATH lookup)
  std::vector<std::string> env;   // NAME=value: the process's whole environment
  std::string log_path;           // stdout and stderr, appended, created 0600
  std::vector<int> cpuset;        // empty: not pinned
  std::string cgroup_procs;       // the cgroup's cgroup.procs file to enter; empty: none
  std::string network_namespace;  // a pinned namespace to join (setns, root); empty: none
  int umask = -1;                 // its file-creation mask; -1: the caller's
  // It ignores SIGTERM (a sandbox's outer process: its program, in its process group, gets it).
  bool ignore_sigterm = false;
};

struct SpawnResult {
  enum Step { kNone, kFork, kCgroup, kNetwork, kStdio, kExec };
  static const char* StepName(Step step);
  pid_t pid = 0;
  Step failed_step = kNone;  // the process did not start
  int error = 0;             // errno of failed_step
  int pin_error = 0;         // errno of a failed sched_setaffinity (it started unpinned)
};

// Starts `req` in a new session (its pid is its process group's id: kill(-pid) reaches what it
// starts that stays in the group). Between fork and exec the child makes only async-signal-safe
// calls (the caller has many threads). Blocks until the exec has happened or failed.
SpawnResult Spawn(const SpawnRequest& req);

}  // namespace weft
