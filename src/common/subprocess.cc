#include "common/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

extern char** environ;

namespace weft {
namespace {

constexpr size_t kMaxOutputBytes = 1 << 20;

}  // namespace

std::vector<std::string> ProcessEnvironment(const std::vector<std::string>& drop) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string kv(*e);
    const std::string name = kv.substr(0, kv.find('='));
    if (std::find(drop.begin(), drop.end(), name) == drop.end()) env.push_back(kv);
  }
  return env;
}

namespace {

// Reads `fd` until its end into `output` (keeping its last kMaxOutputBytes). False when
// `timeout_ms` (> 0) passed first.
bool ReadOutput(int fd, int64_t timeout_ms, std::string* output) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(std::max<int64_t>(timeout_ms, 0));
  char buf[4096];
  for (;;) {
    int wait_ms = -1;
    if (timeout_ms > 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
      if (left <= 0) return false;
      wait_ms = static_cast<int>(std::min<int64_t>(left, 1000));
    }
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, wait_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) continue;
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return true;
    output->append(buf, static_cast<size_t>(n));
    if (output->size() > 2 * kMaxOutputBytes) {
      output->erase(0, output->size() - kMaxOutputBytes);
    }
  }
}

}  // namespace

absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                         const std::vector<std::string>& env, int64_t timeout_ms,
                                         const std::string& stdin_path, int umask) {
  if (argv.empty()) return absl::InvalidArgumentError("RunCommand: no program");
  // Everything the child needs is built before fork: the caller has many threads, and between
  // fork and exec the child may only make async-signal-safe calls (no malloc, no setenv).
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const std::string in_path = stdin_path.empty() ? "/dev/null" : stdin_path;
  const int in = ::open(in_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) {
    return absl::UnavailableError(absl::StrCat("cannot open ", in_path, ": ", strerror(errno)));
  }
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(in);
    return absl::UnavailableError(absl::StrCat("pipe: ", strerror(errno)));
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::signal(SIGPIPE, SIG_DFL);  // weftd and weft-learner ignore it; the command must not
    if (umask >= 0) ::umask(static_cast<mode_t>(umask));
    ::dup2(in, STDIN_FILENO);
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(out[1], STDERR_FILENO);
    ::execvpe(args[0], args.data(), envp.data());
    const char msg[] = "cannot execute the program\n";
    (void)!::write(STDERR_FILENO, msg, sizeof(msg) - 1);
    ::_exit(127);
  }
  const int fork_errno = errno;
  ::close(in);
  ::close(out[1]);
  if (pid < 0) {
    ::close(out[0]);
    return absl::UnavailableError(absl::StrCat("fork: ", strerror(fork_errno)));
  }
  CommandResult result;
  const bool timed_out = !ReadOutput(out[0], timeout_ms, &result.output);
  ::close(out[0]);
  if (timed_out) ::kill(-pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (result.output.size() > kMaxOutputBytes) {
    result.output.erase(0, result.output.size() - kMaxOutputBytes);
  }
  if (timed_out) {
    return absl::UnavailableError(
        absl::StrCat(argv[0], " did not end within ", timeout_ms, " ms; killed"));
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* abbrev = sigabbrev_np(sig);
    return absl::StrCat("was killed by signal ", sig,
                        abbrev ? absl::StrCat(" (SIG", abbrev, ")") : std::string());
  }
  return absl::StrCat("ended with wait status ", status);
}

}  // namespace weft
