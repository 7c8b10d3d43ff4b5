#include "train/command_process.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"
#include "common/subprocess.h"
#include "nlohmann/json.hpp"

namespace weft::train {
namespace {

constexpr char kBwrap[] = "/usr/bin/bwrap";
constexpr char kSetpriv[] = "/usr/bin/setpriv";  // util-linux
constexpr int kInfoFd = 3;                       // bwrap --info-fd: where it says the program's pid
constexpr int kSetupTimeoutMs = 30000;

// argv/envp for execve, built before fork (the child may only make system calls).
struct CStrings {
  explicit CStrings(const std::vector<std::string>& v) {
    for (const std::string& s : v) ptrs.push_back(const_cast<char*>(s.c_str()));
    ptrs.push_back(nullptr);
  }
  std::vector<char*> ptrs;
};

// argv[0] looked up in the PATH of `env` (the program's), as execvp would; "" if not found.
std::string FindProgram(const std::string& name, const std::vector<std::string>& env) {
  if (name.find('/') != std::string::npos) return name;
  std::string path = "/usr/local/bin:/usr/bin:/bin";
  for (const std::string& e : env) {
    if (e.rfind("PATH=", 0) == 0) path = e.substr(5);
  }
  for (absl::string_view dir : absl::StrSplit(path, ':')) {
    const std::string candidate = absl::StrCat(dir.empty() ? "." : dir, "/", name);
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// The child's side of the fork: async-signal-safe system calls only. Never returns.
[[noreturn]] void RunChild(const char* path, char* const* argv, char* const* envp,
                           const char* work_dir, int stdin_fd, int info_fd, int netns_fd,
                           pid_t parent, uid_t uid, gid_t gid) {
  ::setpgid(0, 0);  // its own process group: the executor's SIGTERM to the learner's group
                    // reaches weft-learner, which stops the program with a grace period
  // weftd's umask (077) would make the directories bubblewrap creates for its mount points
  // closed to the program's user; WORK_DIR itself stays owner-only.
  ::umask(022);
  ::signal(SIGPIPE, SIG_DFL);  // weft-learner ignores it; the tenant's program must not
  if (stdin_fd >= 0) ::dup2(stdin_fd, 0);
  if (info_fd >= 0) {
    if (info_fd != kInfoFd) ::dup2(info_fd, kInfoFd);
    ::fcntl(kInfoFd, F_SETFD, 0);
  }
  if (netns_fd >= 0 && ::setns(netns_fd, CLONE_NEWNET) != 0) _exit(126);
  if (uid != ::geteuid()) {  // unsandboxed as root (in the sandbox setpriv does it)
    if (::setgroups(0, nullptr) != 0 || ::setresgid(gid, gid, gid) != 0 ||
        ::setresuid(uid, uid, uid) != 0) {
      _exit(126);
    }
  }
  // After the credentials change (which clears it): die with weft-learner.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) _exit(126);
  if (work_dir != nullptr && ::chdir(work_dir) != 0) _exit(126);
  ::execve(path, argv, envp);
  _exit(127);
}

// Reads bwrap's --info-fd JSON for the program's pid (bwrap writes it once the sandbox is up).
absl::StatusOr<pid_t> ReadSandboxPid(int fd, pid_t bwrap) {
  std::string text;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kSetupTimeoutMs);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) > 0) {
      char buf[512];
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0) text.append(buf, static_cast<size_t>(n));
      nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
      if (!j.is_discarded() && j.contains("child-pid") && j["child-pid"].is_number_integer()) {
        return static_cast<pid_t>(j["child-pid"].get<int64_t>());
      }
      if (n == 0) break;  // bwrap closed it without saying: it failed (its error is logged)
    }
    int status = 0;
    if (::waitpid(bwrap, &status, WNOHANG) == bwrap) {
      return absl::FailedPreconditionError(absl::StrCat("cannot set up the sandbox: bubblewrap ",
                                                        DescribeWaitStatus(status),
                                                        " (its message is in this log)"));
    }
  }
  ::kill(-bwrap, SIGKILL);
  ::waitpid(bwrap, nullptr, 0);
  return absl::FailedPreconditionError(
      "cannot set up the sandbox: bubblewrap did not start the program (see this log)");
}

}  // namespace

std::pair<uid_t, gid_t> CommandUser() {
  if (::geteuid() != 0) return {::geteuid(), ::getegid()};
  const passwd* pw = ::getpwnam("nobody");
  return pw ? std::pair{pw->pw_uid, pw->pw_gid} : std::pair<uid_t, gid_t>{65534, 65534};
}

std::vector<std::string> BwrapArguments(const CommandProcessOptions& o, bool as_root) {
  std::vector<std::string> a = {kBwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"};
  for (const char* dir : {"/tmp", "/var/tmp", "/dev/shm"}) {
    a.insert(a.end(), {"--perms", "1777", "--tmpfs", dir});
  }
  for (const char* dir : {"/run", "/home", "/root"}) a.insert(a.end(), {"--tmpfs", dir});
  if (!o.private_dir.empty()) {
    a.insert(a.end(), {"--tmpfs", o.private_dir});
    // The directories down to WORK_DIR in that tmpfs: searchable by the program's user (bwrap
    // would make them owner-only).
    if (o.work_dir.rfind(o.private_dir + "/", 0) == 0) {
      for (size_t at = o.work_dir.find('/', o.private_dir.size() + 1); at != std::string::npos;
           at = o.work_dir.find('/', at + 1)) {
        a.insert(a.end(), {"--perms", "0711", "--dir", o.work_dir.substr(0, at)});
      }
    }
  }
  for (const std::string& dir : o.read_only_dirs) a.insert(a.end(), {"--ro-bind", dir, dir});
  a.insert(a.end(), {"--bind", o.work_dir, o.work_dir, "--chdir", o.work_dir});
  // As root bubblewrap needs no user namespace and can bind directories only root may reach;
  // the program then becomes nobody through setpriv, with no capabilities and no way back.
  if (!as_root) a.push_back("--unshare-user");
  a.insert(a.end(), {"--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try",
                     "--hostname", "weft-learner"});
  if (o.join_network_of <= 0 && o.network_namespace.empty()) a.push_back("--unshare-net");
  if (as_root) a.insert(a.end(), {"--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"});
  a.insert(a.end(), {"--die-with-parent", "--as-pid-1", "--info-fd", absl::StrCat(kInfoFd), "--"});
  if (as_root && o.pids_limit > 0) {
    a.insert(a.end(),
             {"/usr/bin/prlimit", absl::StrCat("--nproc=", o.pids_limit, ":", o.pids_limit), "--"});
  }
  if (as_root) {
    const auto [uid, gid] =
        o.uid != static_cast<uid_t>(-1) ? std::pair{o.uid, o.uid} : CommandUser();
    a.insert(a.end(), {kSetpriv, absl::StrCat("--reuid=", uid), absl::StrCat("--regid=", gid),
                       "--clear-groups", "--inh-caps=-all", "--no-new-privs", "--"});
  }
  a.insert(a.end(), o.argv.begin(), o.argv.end());
  return a;
}

absl::StatusOr<std::unique_ptr<CommandProcess>> CommandProcess::Start(
    const CommandProcessOptions& o) {
  const bool root = ::geteuid() == 0;
  std::vector<std::string> argv = o.sandbox ? BwrapArguments(o, root) : o.argv;
  const std::string path = o.sandbox ? kBwrap : FindProgram(o.argv.at(0), o.env);
  if (path.empty() || ::access(path.c_str(), X_OK) != 0) {
    return o.sandbox ? absl::FailedPreconditionError(
                           "cannot set up the sandbox: /usr/bin/bwrap is not installed (Debian "
                           "package bubblewrap)")
                     : absl::InvalidArgumentError(
                           absl::StrCat("command[0]: '", o.argv[0], "' is not found in PATH"));
  }
  int netns_fd = -1;
  if (o.sandbox && (o.join_network_of > 0 || !o.network_namespace.empty())) {
    const std::string ns = o.network_namespace.empty()
                               ? absl::StrCat("/proc/", o.join_network_of, "/ns/net")
                               : o.network_namespace;
    netns_fd = ::open(ns.c_str(), O_RDONLY | O_CLOEXEC);
    if (netns_fd < 0 || ::geteuid() != 0) {
      if (netns_fd >= 0) ::close(netns_fd);
      return absl::FailedPreconditionError(
          absl::StrCat("cannot set up the sandbox: joining the gang's network (", ns,
                       ") needs weft-learner "
                       "to run as root"));
    }
  }
  int info[2] = {-1, -1};
  if (o.sandbox && ::pipe2(info, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  CStrings cargv(argv), cenv(o.env);
  // Unsandboxed as root the child itself becomes nobody; in the sandbox setpriv does.
  const auto [uid, gid] = o.sandbox ? std::pair{::geteuid(), ::getegid()} : CommandUser();
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child == 0) {
    RunChild(path.c_str(), cargv.ptrs.data(), cenv.ptrs.data(),
             o.sandbox ? nullptr : o.work_dir.c_str(), o.stdin_fd >= 0 ? o.stdin_fd : null_fd,
             info[1], netns_fd, parent, uid, gid);
  }
  const int fork_errno = errno;
  for (int fd : {info[1], netns_fd, null_fd}) {
    if (fd >= 0) ::close(fd);
  }
  if (child < 0) {
    if (info[0] >= 0) ::close(info[0]);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(fork_errno)));
  }
  pid_t program = child;
  if (o.sandbox) {
    absl::StatusOr<pid_t> p = ReadSandboxPid(info[0], child);
    ::close(info[0]);
    if (!p.ok()) return p.status();
    program = *p;
  }
  return std::unique_ptr<CommandProcess>(new CommandProcess(child, program));
}

absl::StatusOr<std::unique_ptr<CommandProcess>> CommandProcess::StartInContainer(
    const RuntimeCommand& run, RuntimeCommand kill, const ContainerRuntime& runtime,
    std::string name, int stdin_fd) {
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  CStrings cargv(run.argv), cenv(run.env);
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child == 0) {
    RunChild(cargv.ptrs[0], cargv.ptrs.data(), cenv.ptrs.data(), nullptr,
             stdin_fd >= 0 ? stdin_fd : null_fd, -1, -1, parent, ::geteuid(), ::getegid());
  }
  const int fork_errno = errno;
  if (null_fd >= 0) ::close(null_fd);
  if (child < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(fork_errno)));
  auto p = std::unique_ptr<CommandProcess>(new CommandProcess(child, child));
  p->kill_ = std::move(kill);
  p->runtime_ = &runtime;
  p->container_ = std::move(name);
  return p;
}

CommandProcess::~CommandProcess() {
  if (!status_) {
    Kill();
    Wait();
  }
  if (runtime_ != nullptr) runtime_->Forget(container_);
}

// bubblewrap and podman exit with their program's status, and 128 + N when a signal N killed
// it: that comes back as the wait status of a death by signal N.
int CommandProcess::ProgramStatus(int status) const {
  const bool wrapped = program_pid_ != child_ || runtime_ != nullptr;
  if (wrapped && WIFEXITED(status) && WEXITSTATUS(status) > 128 &&
      WEXITSTATUS(status) < 128 + NSIG) {
    return WEXITSTATUS(status) - 128;  // the wait status of a death by that signal
  }
  return status;
}

std::optional<int> CommandProcess::Poll() {
  if (status_) return status_;
  int status = 0;
  pid_t r = ::waitpid(child_, &status, WNOHANG);
  if (r == child_) status_ = ProgramStatus(status);
  if (r < 0 && errno == ECHILD) status_ = 0;
  return status_;
}

int CommandProcess::Wait() {
  while (!status_) {
    int status = 0;
    pid_t r = ::waitpid(child_, &status, 0);
    if (r == child_) status_ = ProgramStatus(status);
    if (r < 0 && errno != EINTR) status_ = 0;
  }
  return *status_;
}

void CommandProcess::Terminate() {
  if (status_) return;
  // A running container's init gets it (and passes it on); the engine's process is left alone,
  // which, signalled just after its program died, would report the signal instead of how the
  // program ended.
  if (runtime_ != nullptr &&
      runtime_->SignalInit(container_, SIGTERM) != ContainerRuntime::Signalled::kNotStarted) {
    return;
  }
  // Unsandboxed the program leads its own process group, and in a container the engine does
  // (it passes SIGTERM on to the container's init); in bubblewrap's sandbox the program is the
  // PID namespace's init (bwrap --as-pid-1), and its children end with it.
  if (program_pid_ == child_) {
    ::kill(-child_, SIGTERM);
  } else {
    ::kill(program_pid_, SIGTERM);
  }
}

void CommandProcess::Kill() {
  if (status_) return;
  if (runtime_ != nullptr && !kill_.argv.empty()) {
    absl::StatusOr<CommandResult> killed = RunCommand(kill_.argv, kill_.env, 30000);
    if (!killed.ok())
      spdlog::warn("cannot kill the program's container: {}", killed.status().message());
  }
  if (program_pid_ != child_) ::kill(program_pid_, SIGKILL);
  ::kill(-child_, SIGKILL);
}

ContainerSpec ProgramContainerSpec(const LearnerLaunch& l, const CommandProcessOptions& po,
                                   const std::string& image, const std::string& what) {
  const ProgramContainer& pc = l.program_container;
  ContainerSpec s;
  s.name =
      absl::StrCat("weft-", l.job_id, "-a", l.attempt, "-r", l.rank, "-", what, "-", ::getpid());
  s.image = image;
  s.argv = po.argv;
  for (const std::string& kv : po.env) {
    const size_t eq = kv.find('=');
    s.env.emplace_back(kv.substr(0, eq), eq == std::string::npos ? "" : kv.substr(eq + 1));
  }
  s.mounts.push_back({po.work_dir, po.work_dir, /*read_only=*/false});
  for (const std::string& dir : po.read_only_dirs) s.mounts.push_back({dir, dir, true});
  if (!pc.shm_dir.empty()) s.mounts.push_back({pc.shm_dir, "/dev/shm", false});
  s.work_dir = po.work_dir;
  s.stdin_input = po.stdin_fd >= 0;
  s.uid = pc.uid;
  s.network_namespace = pc.network_namespace;
  s.cgroup_parent = pc.cgroup_parent;
  s.cpus = pc.cpus;
  s.cpuset = pc.cpuset;
  s.pids_limit = pc.pids_limit;
  // The program's GPUs, and nothing else of the node's: the engine adds each device node and
  // allows it in the container's devices cgroup, which refuses every other device.
  if (what == "program") s.devices = pc.devices;
  s.labels = {{"weft.job", l.job_id},
              {"weft.attempt", absl::StrCat(l.attempt)},
              {"weft.rank", absl::StrCat(l.rank)}};
  return s;
}

}  // namespace weft::train
