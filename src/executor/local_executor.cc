#include "executor/local_executor.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
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
#include "job/layout.h"
#include "ps/segment.h"

extern char** environ;

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
                             std::unique_ptr<MemoryCgroups> cgroups)
    : learner_binary_(std::move(learner_binary)), clock_(clock), cgroups_(std::move(cgroups)) {
  if (cgroups_) {
    const int removed = cgroups_->RemoveUnused();
    if (removed > 0)
      spdlog::info("removed {} empty learner cgroups an earlier weftd left", removed);
  }
}

LocalExecutor::~LocalExecutor() {
  absl::MutexLock lock(&mu_);
  for (const Child& c : children_) {
    ::kill(-c.pid, SIGKILL);
    int status;
    if (!c.adopted) ::waitpid(c.pid, &status, 0);
    if (!c.cgroup.empty()) exited_cgroups_.push_back(c.cgroup);
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
  std::vector<std::string> env;
  // Keep the parent's environment (PATH, locale, ...) minus anything the contract sets and
  // weftd's own token.
  const std::vector<std::string>& ours = LearnerEnvironmentNames();
  for (char** e = environ; e && *e; ++e) {
    std::string kv(*e);
    std::string name = kv.substr(0, kv.find('='));
    if (std::find(ours.begin(), ours.end(), name) == ours.end()) env.push_back(kv);
  }
  for (const auto& [name, value] : weft::LearnerEnvironment(launch)) {
    env.push_back(absl::StrCat(name, "=", value));
  }
  return env;
}

absl::StatusOr<int64_t> LocalExecutor::Start(const LearnerLaunch& launch) {
  RETURN_IF_ERROR(MakeDirs(launch.log_dir));
  RETURN_IF_ERROR(MakeDirs(launch.result_dir));
  RETURN_IF_ERROR(MakeDirs(launch.checkpoint_dir));
  const bool server = launch.ps_server >= 0;
  if (server && static_cast<size_t>(launch.ps_server) >= launch.ps_servers.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter server ", launch.ps_server, " has no address"));
  }
  std::string log_path = server ? ParameterServerLogPath(launch.log_dir, launch.ps_server)
                                : LearnerLogPath(launch.log_dir, launch.rank);
  std::string cgroup;
  if (cgroups_ && launch.memory_limit_mb > 0) {
    auto dir =
        cgroups_->Create(absl::StrCat(launch.job_id, ".a", launch.attempt, ".r", launch.rank),
                         (launch.memory_limit_mb << 20) * kInstrumentedMemoryFactor);
    if (dir.ok()) {
      cgroup = *dir;
    } else {
      spdlog::warn("job {} rank {}: no memory cgroup ({}); a watchdog holds its limit instead",
                   launch.job_id, launch.rank, dir.status().message());
    }
  }

  std::vector<std::string> env = LearnerEnvironment(launch);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  // A parameter server is weft-ps, installed beside weft-learner.
  std::string binary = learner_binary_;
  std::vector<std::string> args = {binary};
  if (server) {
    binary = absl::StrCat(learner_binary_.substr(0, learner_binary_.rfind('/') + 1), "weft-ps");
    args = {binary, "--listen", launch.ps_servers[launch.ps_server]};
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  SpawnRequest req{binary.c_str(),   argv.data(),   envp.data(),
                   log_path.c_str(), launch.cpuset, cgroup.empty() ? "" : cgroup + "/cgroup.procs"};
  SpawnResult spawned = Spawn(req);
  if (spawned.failed_step == SpawnResult::kCgroup) {
    spdlog::warn(
        "job {} rank {}: cannot enter its memory cgroup {} ({}); a watchdog holds its "
        "limit instead",
        launch.job_id, launch.rank, cgroup, strerror(spawned.error));
    (void)cgroups_->Remove(cgroup);
    cgroup.clear();
    req.cgroup_procs.clear();
    spawned = Spawn(req);
  }
  if (spawned.failed_step != SpawnResult::kNone) {
    if (!cgroup.empty()) (void)cgroups_->Remove(cgroup);
    return absl::InternalError(absl::StrCat("cannot start ", binary, ": ",
                                            SpawnResult::StepName(spawned.failed_step), ": ",
                                            strerror(spawned.error)));
  }
  if (spawned.pin_error != 0) {
    spdlog::warn("learner pid {}: cannot pin to cpus {} on this host ({}); it runs unpinned",
                 spawned.pid, absl::StrJoin(launch.cpuset, ","), strerror(spawned.pin_error));
  }
  absl::MutexLock lock(&mu_);
  children_.push_back({launch, spawned.pid, 0, false, "", cgroup});
  return static_cast<int64_t>(spawned.pid);
}

const char* LocalExecutor::SpawnResult::StepName(Step step) {
  switch (step) {
    case kNone:
      return "ok";
    case kFork:
      return "fork";
    case kCgroup:
      return "joining its memory cgroup";
    case kStdio:
      return "opening its log";
    case kExec:
      return "exec";
  }
  return "?";
}

LocalExecutor::SpawnResult LocalExecutor::Spawn(const SpawnRequest& req) {
  // Everything the child needs is prepared here: between fork and exec it calls only
  // async-signal-safe functions (weftd has many threads; the child has one).
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int c : req.cpuset) {
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &cpus);
  }
  const bool pin = !req.cpuset.empty();
  const char* cgroup_procs = req.cgroup_procs.empty() ? nullptr : req.cgroup_procs.c_str();
  sigset_t empty;
  sigemptyset(&empty);
  // The child reports a failed step as {step, errno} on this pipe; a successful exec closes it.
  int report[2];
  SpawnResult result;
  if (::pipe2(report, O_CLOEXEC) != 0) {
    result.failed_step = SpawnResult::kFork;
    result.error = errno;
    return result;
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    auto fail = [&](int step) {
      int msg[2] = {step, errno};
      (void)!::write(report[1], msg, sizeof(msg));
      ::_exit(127);
    };
    ::close(report[0]);
    // Into the cgroup first ("0": this process), so the learner and all it starts are born there
    // and held to its limit from the first byte.
    if (cgroup_procs != nullptr) {
      int fd = ::open(cgroup_procs, O_WRONLY | O_CLOEXEC);
      if (fd < 0 || ::write(fd, "0", 1) != 1) fail(SpawnResult::kCgroup);
      ::close(fd);
    }
    if (pin && ::sched_setaffinity(0, sizeof(cpus), &cpus) != 0) {
      int msg[2] = {-1, errno};  // not fatal: the parent warns
      (void)!::write(report[1], msg, sizeof(msg));
    }
    // Own process group, so Stop() reaches anything the learner starts; default signal mask.
    ::setpgid(0, 0);
    ::sigprocmask(SIG_SETMASK, &empty, nullptr);
    int in = ::open("/dev/null", O_RDONLY);
    int out = ::open(req.log_path, O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (in < 0 || out < 0 || ::dup2(in, STDIN_FILENO) < 0 || ::dup2(out, STDOUT_FILENO) < 0 ||
        ::dup2(out, STDERR_FILENO) < 0) {
      fail(SpawnResult::kStdio);
    }
    if (in > STDERR_FILENO) ::close(in);
    if (out > STDERR_FILENO) ::close(out);
    ::execve(req.binary, req.argv, req.envp);
    fail(SpawnResult::kExec);
  }
  ::close(report[1]);
  if (pid < 0) {
    result.failed_step = SpawnResult::kFork;
    result.error = errno;
    ::close(report[0]);
    return result;
  }
  int msg[2];
  ssize_t n;
  while ((n = ::read(report[0], msg, sizeof(msg))) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof(msg))) break;
    if (msg[0] < 0) {
      result.pin_error = msg[1];
    } else {
      result.failed_step = static_cast<SpawnResult::Step>(msg[0]);
      result.error = msg[1];
    }
  }
  ::close(report[0]);
  if (result.failed_step != SpawnResult::kNone) {
    int status;
    ::waitpid(pid, &status, 0);
    return result;
  }
  result.pid = pid;
  return result;
}

absl::Status LocalExecutor::Stop(const std::string& job_id, int64_t grace_ms) {
  absl::MutexLock lock(&mu_);
  for (Child& c : children_) {
    if (c.launch.job_id != job_id) continue;
    ::kill(-c.pid, grace_ms <= 0 ? SIGKILL : SIGTERM);
    TimeMs deadline = clock_.NowMs() + grace_ms;
    if (c.kill_at_ms == 0 || deadline < c.kill_at_ms) c.kill_at_ms = deadline;
  }
  return absl::OkStatus();
}

absl::Status LocalExecutor::Kill(const std::string& job_id, int rank) {
  absl::MutexLock lock(&mu_);
  for (const Child& c : children_) {
    if (c.launch.job_id != job_id || c.launch.rank != rank) continue;
    ::kill(-c.pid, SIGKILL);  // its process group: anything it started goes too
    return absl::OkStatus();
  }
  return absl::NotFoundError(absl::StrCat("no learner ", rank, " of job ", job_id, " runs here"));
}

namespace {

// Alive and not a zombie, per /proc/<pid>/stat.
bool ProcessAlive(pid_t pid) {
  auto stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  if (!stat.ok()) return false;
  size_t paren = stat->rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat->size()) return false;
  char state = (*stat)[paren + 2];
  return state != 'Z' && state != 'X';
}

// The value of "<field>: N kB" in `text`, in bytes, or -1.
int64_t KibField(const std::string& text, const std::string& field) {
  size_t at = text.find("\n" + field + ":");
  if (at == std::string::npos) return -1;
  int64_t kib = -1;
  if (sscanf(text.c_str() + at + field.size() + 2, " %" SCNd64 " kB", &kib) != 1) return -1;
  return kib * 1024;
}

// Resident anonymous memory of `pid` in bytes, or -1 if it cannot be read. Alone, its RssAnon
// (/proc/<pid>/status, cheap). In a tree of processes, its share of anonymous pages
// (Pss_Anon, /proc/<pid>/smaps_rollup), so pages a fork shares with its parent (a data loader's
// workers) count once across the tree, not once per process.
int64_t ResidentAnonymousBytes(pid_t pid, bool proportional) {
  if (proportional) {
    auto rollup = ReadFile(absl::StrCat("/proc/", pid, "/smaps_rollup"));
    const int64_t pss = rollup.ok() ? KibField("\n" + *rollup, "Pss_Anon") : -1;
    if (pss >= 0) return pss;
  }
  auto status = ReadFile(absl::StrCat("/proc/", pid, "/status"));
  return status.ok() ? KibField(*status, "RssAnon") : -1;
}

// Every process's children, from the parent pid in each /proc/<pid>/stat: one pass over /proc.
std::multimap<pid_t, pid_t> ChildrenByParent() {
  std::multimap<pid_t, pid_t> children;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return children;
  while (dirent* d = readdir(proc)) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(d->d_name, &pid)) continue;
    auto stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
    if (!stat.ok()) continue;  // gone meanwhile
    // "pid (comm) state ppid …"; comm may hold spaces and parentheses, so read after the last ')'.
    size_t paren = stat->rfind(')');
    char state = 0;
    int ppid = 0;
    if (paren != std::string::npos &&
        sscanf(stat->c_str() + paren + 1, " %c %d", &state, &ppid) == 2) {
      children.emplace(ppid, pid);
    }
  }
  closedir(proc);
  return children;
}

// `root` and every process descended from it, by `children`, root first.
std::vector<pid_t> ProcessTree(pid_t root, const std::multimap<pid_t, pid_t>& children) {
  std::vector<pid_t> tree = {root};
  for (size_t i = 0; i < tree.size() && tree.size() < 100000; ++i) {
    auto [from, to] = children.equal_range(tree[i]);
    for (auto it = from; it != to; ++it) tree.push_back(it->second);
  }
  return tree;
}

}  // namespace

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
  if (c.cgroup.empty() || !c.killed_for.empty() || cgroups_->OomKills(c.cgroup) == 0) return;
  const int64_t limit = c.launch.memory_limit_mb << 20;
  // The kernel killed the process that went over (perhaps a command job's program, not the
  // learner): what is left of the learner goes too, as under the watchdog.
  c.killed_for = OutOfMemory(std::max<int64_t>(cgroups_->PeakBytes(c.cgroup), limit), limit);
  spdlog::warn(
      "learner pid {} of job {} rank {}: {} (killed by the kernel in {}); killing the "
      "rest",
      c.pid, c.launch.job_id, c.launch.rank, c.killed_for, c.cgroup);
  ::kill(-c.pid, SIGKILL);
  for (pid_t pid : cgroups_->Processes(c.cgroup)) ::kill(pid, SIGKILL);
}

void LocalExecutor::RemoveCgroups() {
  for (auto it = exited_cgroups_.begin(); it != exited_cgroups_.end();) {
    absl::Status s = cgroups_->Remove(*it);
    if (absl::IsFailedPrecondition(s)) {
      // Something the learner started outlived it: it goes now, the cgroup at a later Reap().
      for (pid_t pid : cgroups_->Processes(*it)) ::kill(pid, SIGKILL);
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
  return true;
}

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
  std::string cgroup = cgroups_ ? cgroups_->CgroupOf(static_cast<pid_t>(pid)) : "";
  absl::MutexLock lock(&mu_);
  children_.push_back({launch, static_cast<pid_t>(pid), 0, /*adopted=*/true, "", cgroup});
  return absl::OkStatus();
}

void LocalExecutor::RemoveParameterServer(const LearnerLaunch& launch) {
  // Its rank 0 removes it when it ends well; one killed (SIGKILL after the stop grace, the OOM
  // killer) leaves it behind. The segment is the attempt's: no other process creates it again.
  absl::StatusOr<std::string> name = ps::SegmentNameForJob(launch.job_id, launch.attempt);
  if (name.ok() && ps::SharedSegment::Unlink(*name).ok()) {
    spdlog::info("job {}: removed parameter-server segment {} that rank 0 left behind",
                 launch.job_id, *name);
  }
}

std::vector<LearnerExit> LocalExecutor::Reap() {
  absl::MutexLock lock(&mu_);
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
      ::kill(-it->pid, SIGKILL);  // anything the learner left behind in its group
      if (!it->cgroup.empty()) {
        // The kernel may have killed it since the look above.
        CheckCgroup(*it);
        e.killed_for = it->killed_for;
        exited_cgroups_.push_back(it->cgroup);
      }
      if (it->launch.rank == 0) RemoveParameterServer(it->launch);
      exits.push_back(e);
      it = children_.erase(it);
      continue;
    }
    if (it->kill_at_ms != 0 && now >= it->kill_at_ms) ::kill(-it->pid, SIGKILL);
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
