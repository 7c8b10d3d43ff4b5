#include "executor/local_executor.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "executor/process_tree.h"
#include "job/layout.h"

namespace weft {

namespace {

// A learner built with AddressSanitizer (scripts/test.sh --sanitize address,undefined) carries
// ASan's shadow memory, redzones and quarantine, which its job did not ask for: the watchdog
// allows it twice the memory it requested, so the suite's jobs run as they do uninstrumented.
#if defined(__SANITIZE_ADDRESS__)
constexpr int64_t kInstrumentedMemoryFactor = 2;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr int64_t kInstrumentedMemoryFactor = 2;
#else
constexpr int64_t kInstrumentedMemoryFactor = 1;
#endif
#else
constexpr int64_t kInstrumentedMemoryFactor = 1;
#endif

// "3.1 GiB" at or above 1 GiB, else "700 MiB".
std::string MemorySize(int64_t bytes) {
  constexpr int64_t kMiB = int64_t{1} << 20;
  if (bytes >= 1024 * kMiB) return absl::StrFormat("%.1f GiB", bytes / (1024.0 * kMiB));
  return absl::StrCat(bytes / kMiB, " MiB");
}

// The reason an over-limit learner was killed, as LearnerExit::killed_for.
std::string OutOfMemory(int64_t used_bytes, int64_t limit_bytes) {
  return absl::StrCat("out of memory: ", MemorySize(used_bytes), " used, ", MemorySize(limit_bytes),
                      " requested (resources.memory_mb)");
}

}  // namespace

std::string LearnerExit::Describe() const {
  std::string status;
  if (!killed_for.empty()) {
    status = killed_for;
  } else if (status_unknown) {
    status = "exited (status unknown: started by an earlier weftd)";
  } else if (signal != 0) {
    status = absl::StrCat("killed by signal ", signal, " (SIG", sigabbrev_np(signal), ")");
  } else {
    status = absl::StrCat("exit code ", exit_code);
  }
  return cause.empty() ? status : absl::StrCat(status, ", ", cause);
}

LocalExecutor::LocalExecutor(std::string learner_binary, const Clock& clock,
                             std::unique_ptr<MemoryCgroups> cgroups,
                             std::unique_ptr<ContainerLauncher> containers)
    : learner_binary_(std::move(learner_binary)),
      clock_(clock),
      cgroups_(std::move(cgroups)),
      containers_(std::move(containers)) {
  if (containers_ && !cgroups_) {
    spdlog::error("learners in containers need cgroups to be killed through; none given");
  }
  if (cgroups_) {
    const int removed = cgroups_->RemoveUnused();
    if (removed > 0)
      spdlog::info("removed {} empty learner cgroups an earlier weftd left", removed);
  }
}

LocalExecutor::~LocalExecutor() {
  absl::MutexLock lock(&mu_);
  for (const Child& c : children_) {
    KillLocked(c);
    int status;
    if (!c.adopted) ::waitpid(c.pid, &status, 0);
    if (!c.cgroup.empty()) exited_cgroups_.push_back(c.cgroup);
    if (c.oom_watch >= 0) ::close(c.oom_watch);
    if (c.contained) containers_->Release(c.launch);
  }
  if (!cgroups_) return;
  // A learner's children (reparented when it was killed) leave its cgroup only once the kernel
  // has reaped them: a few milliseconds. Wait up to 2 s, killing whatever is left, then the
  // parent goes too; a cgroup still busy after that is left for the next weftd to clear.
  // (Real time, not clock_: a test's fake clock must not make this wait forever.)
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  RemoveCgroups();
  while (!exited_cgroups_.empty() && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    RemoveCgroups();
  }
  cgroups_->RemoveUnused();
  (void)cgroups_->Remove(cgroups_->parent());
}

std::vector<std::string> LocalExecutor::LearnerEnvironment(const LearnerLaunch& launch) {
  return HostLearnerEnvironment(launch);
}

std::string LocalExecutor::CgroupName(const LearnerLaunch& launch) {
  // A learner replaced in its attempt (a parameter-server job's) has the same rank: the serial
  // keeps its cgroup apart from the one its predecessor's exit removes.
  return absl::StrCat(launch.job_id, ".a", launch.attempt, ".r", launch.rank, ".",
                      cgroup_serial_.fetch_add(1) + 1);
}

absl::StatusOr<SpawnRequest> LocalExecutor::Plan(const LearnerLaunch& launch,
                                                 const std::string& cgroup, Child* child) {
  const bool server = launch.ps_server >= 0;
  SpawnRequest req;
  req.log_path = server ? ParameterServerLogPath(launch.log_dir, launch.ps_server)
                        : LearnerLogPath(launch.log_dir, launch.rank);
  req.cpuset = launch.cpuset;
  if (!cgroup.empty()) req.cgroup_procs = cgroup + "/cgroup.procs";
  if (!containers_) {
    // Unconfined (weftd --runtime none): the learner as weftd's user, on the host.
    // A parameter server is weft-ps, installed beside weft-learner.
    req.argv = {learner_binary_};
    if (server) {
      req.argv = {
          absl::StrCat(learner_binary_.substr(0, learner_binary_.rfind('/') + 1), "weft-ps"),
          "--listen", launch.ps_servers[launch.ps_server]};
    }
    req.env = LearnerEnvironment(launch);
    return req;
  }
  const std::string cgroup_path = cgroup.empty() ? "" : cgroups_->HierarchyPath(cgroup);
  ASSIGN_OR_RETURN(ContainerLauncher::Launch plan, containers_->Prepare(launch, cgroup_path));
  req.argv = std::move(plan.command.argv);
  req.env = std::move(plan.command.env);
  req.env.push_back(absl::StrCat(kJobUidVariable, "=", plan.uid));
  req.env.push_back(absl::StrCat(kCgroupVariable, "=", cgroup));
  req.network_namespace = plan.command.join_network_namespace;
  if (!plan.join_cgroup) req.cgroup_procs.clear();
  // A container is pinned by its engine (--cpuset-cpus), not through the engine's own process.
  if (!plan.container.empty() && !plan.join_cgroup) req.cpuset.clear();
  // The engine's own umask, not weftd's (077): what it creates for a container (its mount
  // points) must be open to the container's uid. (What the container writes is its --umask's.)
  if (!plan.container.empty()) req.umask = 022;
  req.ignore_sigterm = !plan.container.empty() && !containers_->runtime().ForwardsSigterm();
  child->container = plan.container;
  child->contained = true;
  return req;
}

std::string LocalExecutor::Runtime() const {
  if (!refused_runtime().empty()) return refused_runtime();
  return containers_ ? containers_->runtime().Name() : "none";
}

std::string LocalExecutor::RuntimeDescription() const {
  if (!Available().ok()) return absl::StrCat("cannot run learners: ", Available().message());
  if (!containers_) {
    return "none: learners run unconfined, as weftd's user (weftd --runtime none)";
  }
  return containers_->runtime().Describe();
}

absl::StatusOr<int64_t> LocalExecutor::Start(const LearnerLaunch& launch) {
  RETURN_IF_ERROR(Available());
  RETURN_IF_ERROR(MakeDirs(launch.log_dir));
  RETURN_IF_ERROR(MakeDirs(launch.result_dir));
  RETURN_IF_ERROR(MakeDirs(launch.checkpoint_dir));
  if (launch.ps_server >= 0 && static_cast<size_t>(launch.ps_server) >= launch.ps_servers.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter server ", launch.ps_server, " has no address"));
  }
  // A contained learner always has a cgroup: its container's cgroups go below it, and it is
  // through it that the container is killed.
  std::string cgroup;
  if (cgroups_ && (launch.memory_limit_mb > 0 || containers_)) {
    auto dir = cgroups_->Create(CgroupName(launch),
                                (launch.memory_limit_mb << 20) * kInstrumentedMemoryFactor);
    if (dir.ok()) {
      cgroup = *dir;
    } else if (containers_) {
      return absl::InternalError(
          absl::StrCat("cannot make the learner's cgroup: ", dir.status().message()));
    } else {
      spdlog::warn("job {} rank {}: no memory cgroup ({}); a watchdog holds its limit instead",
                   launch.job_id, launch.rank, dir.status().message());
    }
  }
  Child child;
  child.launch = launch;
  absl::StatusOr<SpawnRequest> req = Plan(launch, cgroup, &child);
  if (!req.ok()) {
    if (!cgroup.empty()) (void)cgroups_->Remove(cgroup);
    return req.status();
  }
  SpawnResult spawned = Spawn(*req);
  if (spawned.failed_step == SpawnResult::kCgroup && !containers_) {
    spdlog::warn(
        "job {} rank {}: cannot enter its memory cgroup {} ({}); a watchdog holds its "
        "limit instead",
        launch.job_id, launch.rank, cgroup, strerror(spawned.error));
    (void)cgroups_->Remove(cgroup);
    cgroup.clear();
    req->cgroup_procs.clear();
    spawned = Spawn(*req);
  }
  if (spawned.failed_step != SpawnResult::kNone) {
    if (containers_) containers_->Release(launch);
    if (!cgroup.empty()) (void)cgroups_->Remove(cgroup);
    return absl::InternalError(absl::StrCat("cannot start ", req->argv[0], ": ",
                                            SpawnResult::StepName(spawned.failed_step), ": ",
                                            strerror(spawned.error)));
  }
  if (spawned.pin_error != 0) {
    spdlog::warn("learner pid {}: cannot pin to cpus {} on this host ({}); it runs unpinned",
                 spawned.pid, absl::StrJoin(launch.cpuset, ","), strerror(spawned.pin_error));
  }
  child.pid = spawned.pid;
  child.cgroup = cgroup;
  if (!cgroup.empty()) child.oom_watch = cgroups_->WatchOom(cgroup);
  absl::MutexLock lock(&mu_);
  children_.push_back(std::move(child));
  return static_cast<int64_t>(spawned.pid);
}

void LocalExecutor::KillLocked(const Child& c) {
  ::kill(-c.pid, SIGKILL);  // its process group: anything it started that stayed there
  // A container's processes are not the engine process's: they go through their cgroups.
  if (c.contained && !c.cgroup.empty()) {
    for (pid_t pid : cgroups_->ProcessesBelow(c.cgroup, containers_->runtime().EngineCgroup())) {
      ::kill(pid, SIGKILL);
    }
  }
}

void LocalExecutor::TerminateLocked(const Child& c) {
  // A running container's init gets it and passes it on to the learner. Its engine process is
  // left alone: signalled after its container ended (the learner killed, say, just before), it
  // would report that signal instead of how the learner ended.
  if (c.contained && !c.adopted && !c.container.empty()) {
    switch (containers_->runtime().SignalInit(c.container, SIGTERM)) {
      case ContainerRuntime::Signalled::kInit:
      case ContainerRuntime::Signalled::kEnded:
        return;
      case ContainerRuntime::Signalled::kNotStarted:
        break;
    }
  }
  // The engine passes it on to the container (podman's sig-proxy), or the learner's process
  // group has it (a learner outside a container, bubblewrap's).
  ::kill(-c.pid, SIGTERM);
}

absl::Status LocalExecutor::Stop(const std::string& job_id, int64_t grace_ms) {
  absl::MutexLock lock(&mu_);
  for (Child& c : children_) {
    if (c.launch.job_id != job_id) continue;
    if (grace_ms <= 0) {
      KillLocked(c);
    } else {
      TerminateLocked(c);
    }
    TimeMs deadline = clock_.NowMs() + grace_ms;
    if (c.kill_at_ms == 0 || deadline < c.kill_at_ms) c.kill_at_ms = deadline;
  }
  return absl::OkStatus();
}

absl::Status LocalExecutor::Kill(const std::string& job_id, int rank) {
  absl::MutexLock lock(&mu_);
  for (const Child& c : children_) {
    if (c.launch.job_id != job_id || c.launch.rank != rank) continue;
    KillLocked(c);
    return absl::OkStatus();
  }
  return absl::NotFoundError(absl::StrCat("no learner ", rank, " of job ", job_id, " runs here"));
}

void LocalExecutor::EnforceMemoryLimit(Child& c, const std::multimap<pid_t, pid_t>& children) {
  if (c.launch.memory_limit_mb <= 0 || !c.killed_for.empty() || !c.cgroup.empty()) return;
  // The learner and every process it started, wherever they went: a command job's program runs
  // in its own process group inside the sandbox.
  const std::vector<pid_t> tree = ProcessTree(c.pid, children);
  int64_t used = 0;
  for (pid_t pid : tree) {
    used += std::max<int64_t>(ResidentAnonymousBytes(pid, tree.size() > 1), 0);
  }
  const int64_t limit = c.launch.memory_limit_mb << 20;
  if (used <= limit * kInstrumentedMemoryFactor) return;
  c.killed_for = OutOfMemory(used, limit);
  spdlog::warn("learner pid {} of job {} rank {} ({} processes): {}; killing them", c.pid,
               c.launch.job_id, c.launch.rank, tree.size(), c.killed_for);
  ::kill(-c.pid, SIGKILL);
  for (pid_t pid : tree) ::kill(pid, SIGKILL);
}

void LocalExecutor::CheckCgroup(Child& c) {
  if (c.cgroup.empty() || !c.killed_for.empty() || c.launch.memory_limit_mb <= 0) return;
  // In a container the process the kernel killed is in a cgroup below the learner's, which
  // counts the kill only there (v1): the learner's own cgroup reports the event (WatchOom).
  if (!MemoryCgroups::OomSeen(c.oom_watch) && cgroups_->OomKills(c.cgroup) == 0) return;
  const int64_t limit = c.launch.memory_limit_mb << 20;
  // The kernel killed the process that went over (perhaps a command job's program, not the
  // learner): what is left of the learner goes too, as under the watchdog.
  c.killed_for = OutOfMemory(std::max<int64_t>(cgroups_->PeakBytes(c.cgroup), limit), limit);
  spdlog::warn(
      "learner pid {} of job {} rank {}: {} (killed by the kernel in {}); killing the "
      "rest",
      c.pid, c.launch.job_id, c.launch.rank, c.killed_for, c.cgroup);
  KillLocked(c);
  for (pid_t pid : cgroups_->Processes(c.cgroup)) ::kill(pid, SIGKILL);
}

void LocalExecutor::RemoveCgroups() {
  for (auto it = exited_cgroups_.begin(); it != exited_cgroups_.end();) {
    absl::Status s = cgroups_->Remove(*it);
    if (absl::IsFailedPrecondition(s)) {
      // Something the learner started outlived it: it goes now, the cgroup at a later Reap().
      for (pid_t pid : cgroups_->Processes(*it)) ::kill(pid, SIGKILL);
      // (A container engine's own process is left to finish cleaning its container up.)
      const std::string engine = containers_ ? containers_->runtime().EngineCgroup() : "";
      for (pid_t pid : cgroups_->ProcessesBelow(*it, engine)) ::kill(pid, SIGKILL);
      ++it;
      continue;
    }
    if (!s.ok()) spdlog::warn("{}", s.message());
    it = exited_cgroups_.erase(it);
  }
}

bool LocalExecutor::Exited(const Child& c, LearnerExit* e) {
  e->job_id = c.launch.job_id;
  e->attempt = c.launch.attempt;
  e->rank = c.launch.rank;
  e->pid = c.pid;
  e->killed_for = c.killed_for;
  if (c.adopted) {
    if (ProcessAlive(c.pid)) return false;
    e->status_unknown = true;
    return true;
  }
  int status = 0;
  if (::waitpid(c.pid, &status, WNOHANG) != c.pid) return false;
  if (WIFSIGNALED(status)) {
    e->signal = WTERMSIG(status);
  } else {
    e->exit_code = WEXITSTATUS(status);
  }
  if (c.contained && !c.container.empty()) ReadEngineExit(e);  // podman's exit code
  return true;
}

namespace {

// The value of `name` in a process's environment as /proc/<pid>/environ has it, after a leading
// NUL (`haystack`); "" when it is not there.
std::string EnvironValue(const std::string& haystack, const std::string& name) {
  const std::string key = absl::StrCat(std::string(1, '\0'), name, "=");
  const size_t at = haystack.find(key);
  if (at == std::string::npos) return "";
  const size_t from = at + key.size();
  return haystack.substr(from, haystack.find('\0', from) - from);
}

}  // namespace

absl::Status LocalExecutor::Adopt(const LearnerLaunch& launch, int64_t pid) {
  auto env = ReadFile(absl::StrCat("/proc/", pid, "/environ"));
  const std::string nul(1, '\0');
  std::string haystack = nul + (env.ok() ? *env : std::string());
  bool ours = env.ok() && ProcessAlive(static_cast<pid_t>(pid)) &&
              absl::StrContains(haystack,
                                absl::StrCat(nul, learner_env::kJobId, "=", launch.job_id, nul)) &&
              absl::StrContains(haystack,
                                absl::StrCat(nul, learner_env::kAttempt, "=", launch.attempt, nul));
  if (!ours) {
    return absl::NotFoundError(absl::StrCat("no live learner of ", launch.job_id, " attempt ",
                                            launch.attempt, " at pid ", pid));
  }
  Child child;
  child.launch = launch;
  child.pid = static_cast<pid_t>(pid);
  child.adopted = true;
  child.cgroup = cgroups_ ? cgroups_->CgroupOf(child.pid) : "";
  // A contained learner: its engine process is outside its cgroup, and says its job's uid.
  const std::string uid_text = EnvironValue(haystack, kJobUidVariable);
  if (containers_ && !uid_text.empty()) {
    uid_t uid = 0;
    if (!absl::SimpleAtoi(uid_text, &uid)) {
      return absl::NotFoundError(absl::StrCat("learner pid ", pid, " names no job uid"));
    }
    // Its cgroup: the one its engine process was told of, if it is one of ours.
    const std::string dir = EnvironValue(haystack, kCgroupVariable);
    if (child.cgroup.empty() && absl::StartsWith(dir, cgroups_->parent() + "/") &&
        dir.find("/..") == std::string::npos && ::access(dir.c_str(), F_OK) == 0) {
      child.cgroup = dir;
    }
    ASSIGN_OR_RETURN(ContainerLauncher::Launch joined,
                     containers_->Prepare(launch, cgroups_->HierarchyPath(dir), uid));
    child.contained = true;
    child.container = IsCommandLearner(launch) ? "" : "adopted";
  }
  if (!child.cgroup.empty()) child.oom_watch = cgroups_->WatchOom(child.cgroup);
  absl::MutexLock lock(&mu_);
  children_.push_back(std::move(child));
  return absl::OkStatus();
}

void LocalExecutor::RemoveLeftoverShm(const LearnerLaunch& launch) {
  // A learner removes it when it ends well; one killed (SIGKILL after the stop grace, the OOM
  // killer) leaves it behind. The name is the attempt's: no other process creates it again.
  if (launch.leftover_shm.empty()) return;
  if (::shm_unlink(launch.leftover_shm.c_str()) == 0) {
    spdlog::info("job {}: removed shared-memory object {} that rank {} left behind", launch.job_id,
                 launch.leftover_shm, launch.rank);
  }
}

std::vector<LearnerExit> LocalExecutor::Reap() {
  absl::MutexLock lock(&mu_);
  if (containers_ && !cleaned_after_adoption_) {
    // The first round comes after weftd's recovery has adopted what it could: whatever of an
    // earlier weftd's attempts is left now belongs to nothing.
    cleaned_after_adoption_ = true;
    if (int n = containers_->RemoveUnused(); n > 0) {
      spdlog::info(
          "removed {} network namespaces and shared-memory directories an earlier weftd "
          "left",
          n);
    }
  }
  std::vector<LearnerExit> exits;
  TimeMs now = clock_.NowMs();
  // Read once per round, and only when some learner has a memory limit to check.
  std::multimap<pid_t, pid_t> children;
  if (std::any_of(children_.begin(), children_.end(), [](const Child& c) {
        return c.launch.memory_limit_mb > 0 && c.cgroup.empty();
      })) {
    children = ChildrenByParent();
  }
  for (auto it = children_.begin(); it != children_.end();) {
    CheckCgroup(*it);  // before Exited(): a learner the kernel killed says why
    LearnerExit e;
    if (Exited(*it, &e)) {
      KillLocked(*it);  // anything the learner left behind
      if (!it->cgroup.empty()) {
        // The kernel may have killed it since the look above.
        CheckCgroup(*it);
        e.killed_for = it->killed_for;
        exited_cgroups_.push_back(it->cgroup);
      }
      if (it->oom_watch >= 0) ::close(it->oom_watch);
      if (it->contained) {
        if (!it->adopted && !it->container.empty()) containers_->runtime().Forget(it->container);
        containers_->Release(it->launch);
      }
      if (!it->contained) RemoveLeftoverShm(it->launch);
      exits.push_back(e);
      it = children_.erase(it);
      continue;
    }
    if (it->kill_at_ms != 0 && now >= it->kill_at_ms) KillLocked(*it);
    EnforceMemoryLimit(*it, children);
    ++it;
  }
  if (cgroups_) RemoveCgroups();
  return exits;
}

absl::StatusOr<std::pair<std::string, int>> LocalExecutor::RendezvousAddress(const std::string&) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("socket: ", strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::string why = strerror(errno);
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("no free port for the rendezvous: ", why));
  }
  ::close(fd);
  return std::make_pair(std::string("127.0.0.1"), static_cast<int>(ntohs(addr.sin_port)));
}

int LocalExecutor::Unreaped(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const Child& c : children_) {
    if (c.launch.job_id == job_id) n += c.adopted ? ProcessAlive(c.pid) : 1;
  }
  return n;
}

int LocalExecutor::Running(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const Child& c : children_) {
    if (c.launch.job_id != job_id) continue;
    if (c.adopted) {
      n += ProcessAlive(c.pid);
      continue;
    }
    // Exited but not yet reaped does not count; WNOWAIT leaves the exit for Reap().
    siginfo_t info{};
    if (::waitid(P_PID, c.pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == c.pid) {
      continue;
    }
    ++n;
  }
  return n;
}

}  // namespace weft
