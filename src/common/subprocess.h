// Running a short helper program to its end and reading what it said: Slurm's commands, the
// container engine's (podman image inspect, podman load). Not for learners, whose processes the
// executors keep (executor/local_executor.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace weft {

struct CommandResult {
  int exit_code = -1;  // 128 + N when signal N ended it
  std::string output;  // stdout and stderr together, at most the last 1 MiB
};

// Runs `argv` (argv[0] looked up in the PATH of `env` unless it holds a '/'; no shell) with
// exactly `env` (NAME=value strings), stdin from `stdin_path` (empty: /dev/null), and waits for
// it at most `timeout_ms` milliseconds (<= 0: no limit), then kills it and its process group.
// Unavailable when it cannot be started (the reason) or did not end in time; otherwise its exit
// code and output, whatever the code.
// `umask`: the process's file-creation mask (-1: this process's own).
absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                         const std::vector<std::string>& env, int64_t timeout_ms,
                                         const std::string& stdin_path = "", int umask = -1);

// This process's environment as NAME=value strings, without the names in `drop`.
std::vector<std::string> ProcessEnvironment(const std::vector<std::string>& drop = {});

// "exited with status 3" / "was killed by signal 9 (SIGKILL)" for a waitpid(2) status.
std::string DescribeWaitStatus(int status);

}  // namespace weft
