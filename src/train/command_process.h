// Starting and stopping a command job's program: in a container of the job's image (podman,
// weftd's default runtime: executor/container_runtime.h), in the sandbox (Debian's bubblewrap)
// or, where weftd allows it, without one (docs/security.md "Command jobs").
//
// The sandbox: the host's root read-only; a private /tmp, /run, /home, /root and /dev/shm; the
// directory weftd keeps its data in (tokens, keys, every job's files) covered by an empty
// tmpfs; WORK_DIR the one writable directory; the data set's directory read-only; its own IPC,
// PID, UTS and cgroup namespaces (and user namespace unless weft-learner is root); and a network
// namespace with only a loopback device — its own, or the one rank 0's program made for the
// job's gang, so the learners of a gang on one host reach each other's rendezvous and nothing
// else. When weft-learner runs as root the program runs as `nobody`, without capabilities.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "executor/container_runtime.h"
#include "job/learner_contract.h"

namespace weft::train {

struct CommandProcessOptions {
  std::vector<std::string> argv;  // the program and its arguments; argv[0] is looked up in PATH
  std::vector<std::string> env;   // "NAME=value": the program's whole environment
  std::string work_dir;           // the program's working directory, the one it may write
  std::vector<std::string> read_only_dirs;  // also visible (read-only) in the sandbox
  std::string private_dir;                  // hidden in the sandbox (weftd's data directory)
  bool sandbox = true;
  // The network: with `join_network_of` > 0 the program joins that process's network namespace
  // (rank 0's program, for a gang; needs root); else a new one with only loopback.
  pid_t join_network_of = 0;
  // Or the network namespace pinned at this path (the attempt's, weftd --runtime bwrap; root).
  std::string network_namespace;
  // Who the program runs as when weft-learner is root: this uid (the job's own, gid the same),
  // or CommandUser() when it is -1.
  uid_t uid = static_cast<uid_t>(-1);
  // Processes and threads its uid may hold (RLIMIT_NPROC: the job's uid is its own); 0: none.
  int64_t pids_limit = 0;
  int stdin_fd = -1;  // the program's standard input; -1: /dev/null. Output is inherited.
};

class CommandProcess {
 public:
  // Starts the program. FailedPrecondition when the sandbox cannot be set up (no bubblewrap,
  // no user namespaces, a network namespace that cannot be joined); Internal when fork fails.
  static absl::StatusOr<std::unique_ptr<CommandProcess>> Start(const CommandProcessOptions& o);
  // Starts a container's engine in the foreground (`run`, ContainerRuntime::Command): the
  // program runs in the container it makes, and ends with it. Terminate() signals the container's
  // init through `runtime` (container `name`, started with record_init_pid), or asks the engine
  // while it does not run yet, which passes SIGTERM on; Kill() runs `kill` (the engine's kill of
  // the container). The wait status is the program's: the engine's 128 + N reads as signal N.
  // `stdin_fd`: the engine's standard input (-1: /dev/null). `runtime` is borrowed and must
  // outlive the process. Internal when fork fails.
  static absl::StatusOr<std::unique_ptr<CommandProcess>> StartInContainer(
      const RuntimeCommand& run, RuntimeCommand kill, const ContainerRuntime& runtime,
      std::string name, int stdin_fd = -1);
  // Kills whatever is left of the program (SIGKILL) and reaps it.
  ~CommandProcess();
  CommandProcess(const CommandProcess&) = delete;
  CommandProcess& operator=(const CommandProcess&) = delete;

  // The program's pid as this process sees it (in the sandbox it is its PID namespace's 1).
  pid_t program_pid() const { return program_pid_; }
  // The wait status (waitpid's) once the program has ended, else nullopt. Never blocks.
  std::optional<int> Poll();
  // Blocks until the program ends; its wait status.
  int Wait();
  // Asks the program to stop: SIGTERM to it (in the sandbox a program without a SIGTERM handler
  // ignores it, as a PID namespace's init does; Kill after a grace period).
  void Terminate();
  // SIGKILL to the program and everything it started.
  void Kill();

 private:
  CommandProcess(pid_t child, pid_t program) : child_(child), program_pid_(program) {}
  // The wait status of the program, from the one of the process this process forked.
  int ProgramStatus(int status) const;
  pid_t child_;          // what this process forked: bwrap, podman, or the program itself
  pid_t program_pid_;    // the program (bwrap's sandbox), or child_
  RuntimeCommand kill_;  // in a container: what kills it
  const ContainerRuntime* runtime_ = nullptr;  // set in a container: its runtime, and its name
  std::string container_;
  std::optional<int> status_;
};

// The bubblewrap command line for `o` (bwrap's path first); `as_root`: weft-learner runs as
// root, so bubblewrap runs without a user namespace and the program as nobody (setpriv).
std::vector<std::string> BwrapArguments(const CommandProcessOptions& o, bool as_root);

// The container of a command job's program, or of the unpacking of its code (`what`: "program",
// "unpack"), on `image`: `po`'s argv, environment and directories (WORK_DIR writable, the data
// set read-only), and what the executor decided for the job in `launch`'s program_container (its
// uid, its gang's network namespace and shared memory, its cgroup and limits).
ContainerSpec ProgramContainerSpec(const LearnerLaunch& launch, const CommandProcessOptions& po,
                                   const std::string& image, const std::string& what);

// The uid and gid the program runs as: nobody's when this process is root, else its own.
std::pair<uid_t, gid_t> CommandUser();

}  // namespace weft::train
