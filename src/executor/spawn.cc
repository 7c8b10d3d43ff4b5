#include "executor/spawn.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

namespace weft {

const char* SpawnResult::StepName(Step step) {
  switch (step) {
    case kNone:
      return "ok";
    case kFork:
      return "fork";
    case kCgroup:
      return "joining its memory cgroup";
    case kNetwork:
      return "joining its gang's network namespace";
    case kStdio:
      return "opening its log";
    case kExec:
      return "exec";
  }
  return "?";
}

namespace {

// What the child needs, prepared before fork: between fork and exec it calls only
// async-signal-safe functions (weftd has many threads; the child has one).
struct ChildPlan {
  cpu_set_t cpus;
  bool pin = false;
  const char* log_path = nullptr;
  bool ignore_sigterm = false;
  const char* cgroup_procs = nullptr;  // null: stays in weftd's cgroup
  int netns = -1;
  int umask = -1;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
};

// The child's side of the fork: reports a failed step as {step, errno} on `report`. Never
// returns.
[[noreturn]] void RunChild(const ChildPlan& p, int report) {
  auto fail = [&](int step) {
    int msg[2] = {step, errno};
    (void)!::write(report, msg, sizeof(msg));
    ::_exit(127);
  };
  // Into the cgroup first ("0": this process), so the learner and all it starts are born there
  // and held to its limit from the first byte.
  if (p.cgroup_procs != nullptr) {
    int fd = ::open(p.cgroup_procs, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || ::write(fd, "0", 1) != 1) fail(SpawnResult::kCgroup);
    ::close(fd);
  }
  if (p.pin && ::sched_setaffinity(0, sizeof(p.cpus), &p.cpus) != 0) {
    int msg[2] = {-1, errno};  // not fatal: the parent warns
    (void)!::write(report, msg, sizeof(msg));
  }
  if (p.netns >= 0 && ::setns(p.netns, CLONE_NEWNET) != 0) fail(SpawnResult::kNetwork);
  // Own session (so its own process group, which Stop() signals, and no controlling terminal);
  // default signal mask.
  ::setsid();
  if (p.umask >= 0) ::umask(static_cast<mode_t>(p.umask));
  sigset_t empty;
  sigemptyset(&empty);
  ::sigprocmask(SIG_SETMASK, &empty, nullptr);
  // Default dispositions too: exec keeps what the caller ignores (weftd ignores SIGPIPE), and a
  // learner, or a tenant's program, must not start out ignoring a signal.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &dfl, nullptr);  // EINVAL: glibc's
  }
  if (p.ignore_sigterm) {
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    ::sigaction(SIGTERM, &ign, nullptr);
  }
  int in = ::open("/dev/null", O_RDONLY);
  int out = ::open(p.log_path, O_WRONLY | O_CREAT | O_APPEND, 0600);
  if (in < 0 || out < 0 || ::dup2(in, STDIN_FILENO) < 0 || ::dup2(out, STDOUT_FILENO) < 0 ||
      ::dup2(out, STDERR_FILENO) < 0) {
    fail(SpawnResult::kStdio);
  }
  if (in > STDERR_FILENO) ::close(in);
  if (out > STDERR_FILENO) ::close(out);
  ::execve(p.argv[0], p.argv, p.envp);
  fail(SpawnResult::kExec);
  ::_exit(127);  // fail() has exited
}

// The child's reports until its exec closes `report`, into `result`.
void ReadReport(int report, SpawnResult* result) {
  int msg[2];
  ssize_t n;
  while ((n = ::read(report, msg, sizeof(msg))) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof(msg))) break;
    if (msg[0] < 0) {
      result->pin_error = msg[1];
    } else {
      result->failed_step = static_cast<SpawnResult::Step>(msg[0]);
      result->error = msg[1];
    }
  }
}

}  // namespace

SpawnResult Spawn(const SpawnRequest& req) {
  ChildPlan plan;
  CPU_ZERO(&plan.cpus);
  for (int c : req.cpuset) {
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &plan.cpus);
  }
  plan.pin = !req.cpuset.empty();
  plan.log_path = req.log_path.c_str();
  plan.ignore_sigterm = req.ignore_sigterm;
  plan.cgroup_procs = req.cgroup_procs.empty() ? nullptr : req.cgroup_procs.c_str();
  plan.umask = req.umask;
  std::vector<char*> argv;
  for (const std::string& a : req.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& e : req.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  plan.argv = argv.data();
  plan.envp = envp.data();
  SpawnResult result;
  if (!req.network_namespace.empty()) {
    plan.netns = ::open(req.network_namespace.c_str(), O_RDONLY | O_CLOEXEC);
    if (plan.netns < 0) {
      result.failed_step = SpawnResult::kNetwork;
      result.error = errno;
      return result;
    }
  }
  // The child reports a failed step as {step, errno} on this pipe; a successful exec closes it.
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    result.failed_step = SpawnResult::kFork;
    result.error = errno;
    if (plan.netns >= 0) ::close(plan.netns);
    return result;
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(report[0]);
    RunChild(plan, report[1]);
  }
  ::close(report[1]);
  if (plan.netns >= 0) ::close(plan.netns);
  if (pid < 0) {
    result.failed_step = SpawnResult::kFork;
    result.error = errno;
    ::close(report[0]);
    return result;
  }
  ReadReport(report[0], &result);
  ::close(report[0]);
  if (result.failed_step != SpawnResult::kNone) {
    int status;
    ::waitpid(pid, &status, 0);
    return result;
  }
  result.pid = pid;
  return result;
}

}  // namespace weft
