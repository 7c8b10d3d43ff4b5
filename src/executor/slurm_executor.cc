#include "executor/slurm_executor.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "executor/learner_container.h"
#include "job/layout.h"

namespace weft {
namespace {

// How long one of Slurm's commands (sbatch, squeue, scontrol, scancel) may take.
constexpr int64_t kSlurmCommandTimeoutMs = 60000;

// `value` quoted for sh: in single quotes, a quote as '\''.
std::string ShellQuote(const std::string& value) {
  std::string out = "'";
  for (char c : value) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// "Key=Value" fields of `scontrol show … -o` output.
std::map<std::string, std::string> Fields(const std::string& line) {
  std::map<std::string, std::string> out;
  for (absl::string_view word : absl::StrSplit(line, absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
    const size_t eq = word.find('=');
    if (eq != absl::string_view::npos) {
      out[std::string(word.substr(0, eq))] = std::string(word.substr(eq + 1));
    }
  }
  return out;
}

// A TCP port free on this host when asked.
int FreeLocalPort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

bool Terminal(const std::string& state) {
  static const std::set<std::string> kLive = {"PENDING",   "RUNNING",    "CONFIGURING",
                                              "SUSPENDED", "COMPLETING", "REQUEUED",
                                              "RESIZING",  "SIGNALING",  "STAGE_OUT"};
  return !state.empty() && kLive.count(state) == 0;
}

}  // namespace

SlurmExecutor::SlurmExecutor(Options options, const Clock& clock)
    : options_(std::move(options)), clock_(clock), uids_(options_.first_uid, options_.uid_count) {}

std::string SlurmExecutor::RuntimeDescription() const {
  if (!Available().ok()) return absl::StrCat("cannot run learners: ", Available().message());
  if (options_.runtime == nullptr) {
    return "none: learners run on their Slurm nodes as Slurm's job user (weftd --runtime none)";
  }
  return absl::StrCat(options_.runtime->Describe(),
                      "; on a Slurm node the host's network, weftd reached over TCP");
}

absl::StatusOr<std::string> SlurmExecutor::ExecLines(const LearnerLaunch& launch, uid_t uid,
                                                     int64_t stop_seconds) const {
  std::string text;
  const bool server = launch.ps_server >= 0;
  if (options_.runtime == nullptr) {
    for (const auto& [name, value] : LearnerEnvironment(launch)) {
      absl::StrAppend(&text, "export ", name, "=", ShellQuote(value), "\n");
    }
    // Slurm chose the learner's GPUs (its gres): those are the ones it has, and reports.
    if (!launch.gpus.empty()) {
      absl::StrAppend(&text, "if [ -n \"${SLURM_JOB_GPUS:-}\" ]; then export ", learner_env::kGpus,
                      "=\"$SLURM_JOB_GPUS\"; fi\n");
    }
    const std::string& learner = options_.learner_binary;
    if (server) {
      absl::StrAppend(&text, "exec ",
                      ShellQuote(learner.substr(0, learner.rfind('/') + 1) + "weft-ps"),
                      " --listen ", ShellQuote(launch.ps_servers[launch.ps_server]), "\n");
    } else {
      absl::StrAppend(&text, "exec ", ShellQuote(learner), "\n");
    }
    return text;
  }
  // The attempt's shared memory on this node (a parameter server's segment), the job's uid's.
  AttemptSetup setup;
  setup.uid = uid;
  setup.shm_dir = absl::StrCat("/dev/shm/weft-slurm/", launch.job_id, ".a", launch.attempt);
  absl::StrAppend(&text, "mkdir -p ", ShellQuote(setup.shm_dir), " && chown ", uid, ":", uid, " ",
                  ShellQuote(setup.shm_dir), " && chmod 700 ", ShellQuote(setup.shm_dir),
                  " || exit 1\n");
  const std::string name = absl::StrCat(SlurmName(launch), "-", ::getpid(), "-", clock_.NowMs());
  ASSIGN_OR_RETURN(RuntimeCommand cmd, options_.runtime->Command(LearnerContainer(
                                           launch, options_.container, setup, "", name)));
  for (const std::string& kv : cmd.env) {
    const size_t eq = kv.find('=');
    absl::StrAppend(&text, "export ", kv.substr(0, eq), "=", ShellQuote(kv.substr(eq + 1)), "\n");
  }
  // The engine runs beside the shell, which stays to answer for the container: its conmon
  // leaves the Slurm job's processes, so a signal to them would not reach the learner. TERM
  // (weft's Stop, or scancel from outside) goes on to the learner, which podman kills if it has
  // not ended `stop_seconds` later; USR1 (weft's Kill) kills it at once.
  // The shell ends with the engine's exit code (128 + n: signal n ended the learner).
  const std::string podman = ShellQuote(cmd.argv.front());
  const std::string container = ShellQuote(name);
  absl::StrAppend(&text, "trap ",
                  ShellQuote(absl::StrCat(podman, " stop --time ", stop_seconds, " ", container,
                                          " >/dev/null 2>&1")),
                  " TERM INT HUP\n");
  absl::StrAppend(
      &text, "trap ",
      ShellQuote(absl::StrCat(podman, " kill --signal KILL ", container, " >/dev/null 2>&1")),
      " USR1\n");
  for (const std::string& a : cmd.argv) absl::StrAppend(&text, ShellQuote(a), " ");
  absl::StrAppend(&text,
                  "</dev/null &\n"
                  "engine=$!\n"
                  "while :; do wait $engine; rc=$?; kill -0 $engine 2>/dev/null || break; done\n",
                  podman, " rm --force --time 0 ", container, " >/dev/null 2>&1\n", "exit $rc\n");
  return text;
}

int64_t SlurmExecutor::ContainerStopSeconds() {
  {
    absl::MutexLock lock(&mu_);
    if (container_stop_seconds_ > 0) return container_stop_seconds_;
  }
  int64_t kill_wait = 30;  // Slurm's default
  const CommandOutput out = Command({"scontrol", "show", "config"});
  for (absl::string_view line : absl::StrSplit(out.text, '\n')) {
    // "KillWait                = 30 sec"
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (out.exit_code == 0 && words.size() >= 3 && words[0] == "KillWait" && words[1] == "=") {
      (void)absl::SimpleAtoi(words[2], &kill_wait);
    }
  }
  absl::MutexLock lock(&mu_);
  container_stop_seconds_ = std::max<int64_t>(1, kill_wait - 1);
  return container_stop_seconds_;
}

std::vector<std::string> SlurmExecutor::SignalCommand(int64_t handle, bool kill) const {
  if (options_.runtime != nullptr) {
    // The launch script's shell relays it to the container (ExecLines).
    return {"scancel", "--batch", kill ? "--signal=USR1" : "--signal=TERM", absl::StrCat(handle)};
  }
  // --full: the batch shell is the learner (the launch script execs it).
  return {"scancel", kill ? "--signal=KILL" : "--signal=TERM", "--full", absl::StrCat(handle)};
}

std::string SlurmExecutor::SlurmName(const LearnerLaunch& l) {
  return absl::StrCat("weft-", l.job_id, "-a", l.attempt, "-r", l.rank);
}

SlurmExecutor::CommandOutput SlurmExecutor::Command(const std::vector<std::string>& argv) const {
  std::vector<std::string> env =
      ProcessEnvironment(options_.slurm_conf.empty() ? std::vector<std::string>{}
                                                     : std::vector<std::string>{"SLURM_CONF"});
  if (!options_.slurm_conf.empty()) env.push_back("SLURM_CONF=" + options_.slurm_conf);
  CommandOutput out;
  absl::StatusOr<CommandResult> r = RunCommand(argv, env, kSlurmCommandTimeoutMs);
  if (!r.ok()) {
    out.text = std::string(r.status().message());
    return out;
  }
  out.exit_code = r->exit_code;
  out.text = std::move(r->output);
  return out;
}

absl::StatusOr<int64_t> SlurmExecutor::Start(const LearnerLaunch& launch) {
  RETURN_IF_ERROR(Available());
  if (!launch.gpus.empty() && options_.runtime != nullptr) {
    return absl::FailedPreconditionError(
        "GPUs on Slurm: weft asks Slurm for them (--gres=gpu:N) but cannot give a container on "
        "a Slurm node the devices Slurm chose; run weftd --executor slurm with --runtime none, "
        "where Slurm's own cgroup (cgroup.conf ConstrainDevices=yes) holds a learner to its "
        "devices");
  }
  // A scale-out parameter-server job's server is weft-ps, installed beside weft-learner.
  const bool server = launch.ps_server >= 0;
  if (server && static_cast<size_t>(launch.ps_server) >= launch.ps_servers.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter server ", launch.ps_server, " has no address"));
  }
  for (const std::string& dir : {launch.log_dir, launch.result_dir, launch.checkpoint_dir}) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  }
  // A learner in a container runs as its job's uid, which owns the job's files from now on.
  uid_t uid = 0;
  if (options_.runtime != nullptr) {
    ASSIGN_OR_RETURN(uid, uids_.Take(launch.job_id));
    if (absl::Status s = PrepareJobFiles(launch, uid); !s.ok()) {
      uids_.Release(launch.job_id);
      return s;
    }
  }
  absl::StatusOr<std::string> exec =
      ExecLines(launch, uid, options_.runtime != nullptr ? ContainerStopSeconds() : 0);
  if (!exec.ok()) {
    if (options_.runtime != nullptr) uids_.Release(launch.job_id);
    return exec.status();
  }
  // The learner's environment goes in a launch script (it holds the job's credential: owner
  // only); Slurm keeps its own copy of a batch script from submission on, so ours goes at once.
  const std::string script = absl::StrCat(launch.log_dir, "/slurm-launch-", launch.rank, ".sh");
  {
    int fd = open(script.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0700);
    if (fd < 0) return absl::InternalError(absl::StrCat("cannot write ", script));
    const std::string text =
        absl::StrCat("#!/bin/sh\n# weft learner ", SlurmName(launch), "\n", *exec);
    const bool written = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    close(fd);
    if (!written) return absl::InternalError(absl::StrCat("cannot write ", script));
  }
  std::vector<std::string> argv = {
      "sbatch",
      "--parsable",
      "--job-name=" + SlurmName(launch),
      "--nodelist=" + launch.node,
      "--nodes=1",
      "--ntasks=1",
      absl::StrCat("--cpus-per-task=", std::max(1, launch.threads)),
      "--output=" + (server ? ParameterServerLogPath(launch.log_dir, launch.ps_server)
                            : LearnerLogPath(launch.log_dir, launch.rank)),
      "--open-mode=append",
      "--export=NIL"};
  if (launch.memory_limit_mb > 0) argv.push_back(absl::StrCat("--mem=", launch.memory_limit_mb));
  if (!launch.gpus.empty()) argv.push_back(absl::StrCat("--gres=gpu:", launch.gpus.size()));
  // The job's uid, for a weftd that adopts the learner after a restart.
  if (options_.runtime != nullptr) argv.push_back(absl::StrCat("--comment=weft-uid=", uid));
  if (!options_.partition.empty()) argv.push_back("--partition=" + options_.partition);
  argv.push_back(script);
  CommandOutput out = Command(argv);
  unlink(script.c_str());
  int64_t handle = 0;
  const std::string first = out.text.substr(0, out.text.find_first_of(";\n"));
  if (out.exit_code != 0 || !absl::SimpleAtoi(first, &handle)) {
    if (options_.runtime != nullptr) uids_.Release(launch.job_id);
    return absl::InternalError(absl::StrCat("sbatch refused learner ", SlurmName(launch), ": ",
                                            absl::StripAsciiWhitespace(out.text)));
  }
  absl::MutexLock lock(&mu_);
  learners_[handle] = Learner{launch, handle, options_.runtime != nullptr, std::nullopt, false};
  return handle;
}

absl::Status SlurmExecutor::Kill(const std::string& job_id, int rank) {
  int64_t handle = 0;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [h, l] : learners_) {
      if (l.launch.job_id != job_id || l.launch.rank != rank) continue;
      l.cancelled_by_weft = true;  // weft's doing, not a cancel from outside
      handle = h;
    }
  }
  if (handle == 0) {
    return absl::NotFoundError(absl::StrCat("no learner ", rank, " of job ", job_id, " runs here"));
  }
  Command(SignalCommand(handle, /*kill=*/true));
  return absl::OkStatus();
}

absl::Status SlurmExecutor::Stop(const std::string& job_id, int64_t grace_ms) {
  std::vector<int64_t> handles;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [handle, l] : learners_) {
      if (l.launch.job_id == job_id) handles.push_back(handle);
    }
  }
  if (handles.empty()) return absl::OkStatus();
  // Which of them still run: one cancelled from outside just before (its peers' exits are
  // often reaped first, and they bring this Stop) must keep that cause.
  const std::optional<std::map<int64_t, std::string>> states = States(handles);
  {
    absl::MutexLock lock(&mu_);
    const TimeMs kill_at = clock_.NowMs() + std::max<int64_t>(grace_ms, 0);
    for (int64_t handle : handles) {
      auto it = learners_.find(handle);
      if (it == learners_.end()) continue;
      it->second.kill_at_ms = kill_at;
      std::string state;  // "" if unknown: counted as still running
      if (states && states->count(handle)) state = states->at(handle);
      it->second.cancelled_by_weft = state != "COMPLETING" && !Terminal(state);
    }
  }
  for (int64_t handle : handles) Command(SignalCommand(handle, /*kill=*/grace_ms <= 0));
  return absl::OkStatus();
}

std::optional<std::map<int64_t, std::string>> SlurmExecutor::States(
    const std::vector<int64_t>& handles) const {
  std::vector<std::string> ids;
  for (int64_t h : handles) ids.push_back(absl::StrCat(h));
  CommandOutput q =
      Command({"squeue", "-h", "-t", "all", "-j", absl::StrJoin(ids, ","), "-o", "%i %T"});
  if (q.exit_code != 0 && q.text.find("Invalid job id") == std::string::npos) {
    spdlog::warn("squeue failed ({}); learner states are learned later", q.text);
    return std::nullopt;
  }
  std::map<int64_t, std::string> states;
  for (absl::string_view line : absl::StrSplit(q.text, '\n', absl::SkipEmpty())) {
    std::vector<std::string> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
    int64_t id = 0;
    if (parts.size() == 2 && absl::SimpleAtoi(parts[0], &id)) states[id] = parts[1];
  }
  return states;
}

LearnerExit SlurmExecutor::ExitOf(const Learner& l) const {
  LearnerExit e;
  e.job_id = l.launch.job_id;
  e.attempt = l.launch.attempt;
  e.rank = l.launch.rank;
  e.pid = l.handle;
  CommandOutput out = Command({"scontrol", "show", "job", "-o", absl::StrCat(l.handle)});
  std::map<std::string, std::string> f = Fields(out.text);
  if (out.exit_code != 0 || f.count("JobState") == 0) {
    e.status_unknown = true;  // Slurm has forgotten it (MinJobAge passed)
    return e;
  }
  const std::string& state = f["JobState"];
  std::vector<std::string> code = absl::StrSplit(f["ExitCode"], ':');
  int exit_code = 0, signal = 0;
  if (code.size() == 2) {
    (void)absl::SimpleAtoi(code[0], &exit_code);
    (void)absl::SimpleAtoi(code[1], &signal);
  }
  e.exit_code = exit_code;
  e.signal = signal;
  if (options_.runtime != nullptr) ReadEngineExit(&e);  // the launch script ends with podman's
  if (state == "OUT_OF_MEMORY") {
    e.killed_for =
        absl::StrCat("out of memory: over Slurm's limit of ", l.launch.memory_limit_mb, " MiB");
  } else if (state == "NODE_FAIL" || state == "BOOT_FAIL" || state == "DEADLINE" ||
             state == "TIMEOUT" || state == "PREEMPTED") {
    e.signal = SIGKILL;  // lost with its node or ended by Slurm: restartable
  } else if (state == "CANCELLED" && !l.cancelled_by_weft) {
    // Not weft's Stop: someone ran scancel. Counted as the signal that ended it, so a gang's
    // cancelled learner is taken as the cause, not its peers that failed because it was gone.
    e.cause = "cancelled in Slurm from outside weft (scancel)";
    if (e.signal == 0) e.signal = SIGTERM;
  } else if (state == "CANCELLED" && signal == 0 && exit_code == 0) {
    e.signal = SIGKILL;  // cancelled by weft's Stop before it ran
  }
  return e;
}

std::vector<LearnerExit> SlurmExecutor::Reap() {
  std::vector<Learner> check;
  std::vector<int64_t> overdue;
  {
    absl::MutexLock lock(&mu_);
    const TimeMs now = clock_.NowMs();
    if (now - last_poll_ms_ < options_.poll_interval_ms) return {};
    last_poll_ms_ = now;
    for (const auto& [handle, l] : learners_) {
      check.push_back(l);
      if (l.kill_at_ms && *l.kill_at_ms <= now) overdue.push_back(handle);
    }
  }
  if (check.empty()) return {};
  for (int64_t handle : overdue) Command(SignalCommand(handle, /*kill=*/true));
  std::vector<int64_t> handles;
  for (const Learner& l : check) handles.push_back(l.handle);
  const std::optional<std::map<int64_t, std::string>> states = States(handles);
  if (!states) return {};
  // A gang's learners that end together are reported together: while one of a job's learners
  // is still COMPLETING (its processes ending, e.g. a container stopping after an scancel from
  // outside), the others' exits wait for it, so that its cause is seen beside its peers' — who
  // failed only because it was gone.
  std::set<std::string> ending;
  for (const Learner& l : check) {
    auto it = states->find(l.handle);
    if (it != states->end() && it->second == "COMPLETING") ending.insert(l.launch.job_id);
  }
  std::vector<LearnerExit> exits;
  for (const Learner& l : check) {
    auto it = states->find(l.handle);
    if (it != states->end() && !Terminal(it->second)) continue;
    if (ending.count(l.launch.job_id) > 0) continue;
    exits.push_back(ExitOf(l));
  }
  absl::MutexLock lock(&mu_);
  for (const LearnerExit& e : exits) {
    auto it = learners_.find(e.pid);
    if (it == learners_.end()) continue;
    if (it->second.holds_uid) uids_.Release(it->second.launch.job_id);
    learners_.erase(it);
  }
  return exits;
}

absl::Status SlurmExecutor::Adopt(const LearnerLaunch& launch, int64_t handle) {
  CommandOutput out = Command({"squeue", "-h", "-j", absl::StrCat(handle), "-o", "%T %j"});
  std::vector<std::string> parts =
      absl::StrSplit(out.text, absl::ByAnyChar(" \n"), absl::SkipEmpty());
  if (out.exit_code != 0 || parts.size() != 2 || Terminal(parts[0]) ||
      parts[1] != SlurmName(launch)) {
    return absl::NotFoundError(
        absl::StrCat("no live Slurm job ", handle, " for learner ", SlurmName(launch)));
  }
  // A learner in a container keeps its job's uid (the Slurm job's comment says which).
  bool holds_uid = false;
  if (options_.runtime != nullptr) {
    std::map<std::string, std::string> f =
        Fields(Command({"scontrol", "show", "job", "-o", absl::StrCat(handle)}).text);
    uid_t uid = 0;
    const std::string comment = f["Comment"];
    if (absl::StartsWith(comment, "weft-uid=") && absl::SimpleAtoi(comment.substr(9), &uid)) {
      holds_uid = uids_.Take(launch.job_id, uid).ok();
    }
  }
  absl::MutexLock lock(&mu_);
  learners_[handle] = Learner{launch, handle, holds_uid, std::nullopt, false};
  return absl::OkStatus();
}

int SlurmExecutor::Running(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const auto& [handle, l] : learners_) n += l.launch.job_id == job_id;
  return n;
}

absl::StatusOr<std::pair<std::string, int>> SlurmExecutor::RendezvousAddress(
    const std::string& node) {
  CommandOutput out = Command({"scontrol", "show", "node", "-o", node});
  std::map<std::string, std::string> f = Fields(out.text);
  if (out.exit_code != 0 || f["NodeAddr"].empty()) {
    return absl::UnavailableError(absl::StrCat("Slurm does not know node ", node, ": ", out.text));
  }
  const int port = FreeLocalPort();
  if (port == 0) return absl::UnavailableError("no free port for the rendezvous");
  return std::make_pair(f["NodeAddr"], port);
}

absl::StatusOr<std::vector<SlurmExecutor::SlurmNode>> SlurmExecutor::Nodes() {
  std::vector<std::string> argv = {"sinfo", "-h", "-N", "-o", "%N|%c|%m|%G|%T"};
  if (!options_.partition.empty()) argv.push_back("--partition=" + options_.partition);
  CommandOutput out = Command(argv);
  if (out.exit_code != 0) {
    return absl::UnavailableError(
        absl::StrCat("sinfo failed: ", absl::StripAsciiWhitespace(out.text)));
  }
  std::map<std::string, SlurmNode> nodes;  // sinfo -N lists a node once per partition
  for (absl::string_view line : absl::StrSplit(out.text, '\n', absl::SkipEmpty())) {
    std::vector<std::string> p = absl::StrSplit(line, '|');
    if (p.size() != 5) continue;
    SlurmNode n;
    n.name = p[0];
    (void)absl::SimpleAtoi(p[1], &n.cpus);
    (void)absl::SimpleAtoi(p[2], &n.memory_mb);
    // gres such as "gpu:2" or "gpu:a100:2(S:0)"; "(null)" for none.
    for (absl::string_view g : absl::StrSplit(p[3], ',')) {
      if (!absl::StartsWith(g, "gpu:")) continue;
      std::vector<std::string> parts = absl::StrSplit(g.substr(0, g.find('(')), ':');
      (void)absl::SimpleAtoi(parts.back(), &n.gpus);
    }
    n.state = p[4];
    nodes[n.name] = n;
  }
  std::vector<SlurmNode> list;
  for (auto& [name, n] : nodes) list.push_back(n);
  return list;
}

}  // namespace weft
