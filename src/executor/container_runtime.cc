#include "executor/container_runtime.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "nlohmann/json.hpp"

namespace weft {
namespace {

constexpr char kEngineProfile[] = "/usr/share/containers/seccomp.json";
// What podman's --init runs as a container's pid 1 (catatonit, as podman binds it in).
constexpr char kInitProgram[] = "/run/podman-init";
constexpr char kEnginePath[] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
// Linux's clone flag for a new user namespace, and the ioctls that reach a terminal's input
// queue (TIOCSTI) or the console (TIOCLINUX).
constexpr uint64_t kCloneNewUser = 0x10000000;
constexpr uint64_t kTiocsti = 0x5412;
constexpr uint64_t kTioclinux = 0x541C;
constexpr int kEperm = 1;
constexpr int kEnosys = 38;
// podman sets its own RLIMIT_NPROC to this at start, so a container may ask no more.
constexpr int64_t kPodmanNprocCeiling = 32768;

bool SafeName(const std::string& s) {
  return !s.empty() && s.size() <= 200 && std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '_' || c == '.' || c == '-';
  });
}

// A mount's path: absolute, and nothing podman's -v syntax would read as a separator.
absl::Status CheckMountPath(const std::string& path) {
  if (path.empty() || path[0] != '/' || path.find(':') != std::string::npos ||
      path.find(',') != std::string::npos || path.find('\n') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("mount path '", path, "' must be absolute, without ':' or ','"));
  }
  return absl::OkStatus();
}

// A variable podman's own process needs a value of its own for.
bool EngineVariable(const std::string& name) {
  return name == "PATH" || name == "LANG" || name == "CONTAINERS_CONF";
}

}  // namespace

absl::StatusOr<std::string> SeccompProfile(const std::string& engine_profile) {
  nlohmann::json p = nlohmann::json::parse(engine_profile, nullptr, false);
  if (p.is_discarded() || !p.is_object() || !p.contains("syscalls") || !p["syscalls"].is_array()) {
    return absl::InvalidArgumentError("not a seccomp profile: no \"syscalls\" list");
  }
  // Out of every unconditional allow: the calls allowed below only with their arguments checked.
  const std::vector<std::string> guarded = {"unshare", "clone", "clone3", "ioctl"};
  for (nlohmann::json& rule : p["syscalls"]) {
    if (!rule.is_object() || rule.value("action", "") != "SCMP_ACT_ALLOW") continue;
    if (rule.contains("args") && !rule["args"].empty()) continue;
    if (!rule.contains("names") || !rule["names"].is_array()) continue;
    nlohmann::json kept = nlohmann::json::array();
    for (const nlohmann::json& n : rule["names"]) {
      if (!n.is_string() ||
          std::find(guarded.begin(), guarded.end(), n.get<std::string>()) == guarded.end()) {
        kept.push_back(n);
      }
    }
    rule["names"] = kept;
  }
  auto masked = [](uint64_t mask, uint64_t equals) {
    return nlohmann::json{
        {"index", 0}, {"value", mask}, {"valueTwo", equals}, {"op", "SCMP_CMP_MASKED_EQ"}};
  };
  p["syscalls"].push_back({{"names", {"unshare", "clone"}},
                           {"action", "SCMP_ACT_ALLOW"},
                           {"args", {masked(kCloneNewUser, 0)}},
                           {"comment", "weft: no new user namespace"}});
  p["syscalls"].push_back({{"names", {"unshare", "clone"}},
                           {"action", "SCMP_ACT_ERRNO"},
                           {"errnoRet", kEperm},
                           {"args", {masked(kCloneNewUser, kCloneNewUser)}},
                           {"comment", "weft: no new user namespace"}});
  p["syscalls"].push_back({{"names", {"clone3"}},
                           {"action", "SCMP_ACT_ERRNO"},
                           {"errnoRet", kEnosys},
                           {"comment", "weft: clone3's flags are out of the filter's reach"}});
  p["syscalls"].push_back({{"names", {"ioctl"}},
                           {"action", "SCMP_ACT_ALLOW"},
                           {"args",
                            {{{"index", 1}, {"value", kTiocsti}, {"op", "SCMP_CMP_NE"}},
                             {{"index", 1}, {"value", kTioclinux}, {"op", "SCMP_CMP_NE"}}}},
                           {"comment", "weft: no input pushed into a terminal"}});
  p["syscalls"].push_back({{"names", {"ioctl"}},
                           {"action", "SCMP_ACT_ERRNO"},
                           {"errnoRet", kEperm},
                           {"args", {{{"index", 1}, {"value", kTiocsti}, {"op", "SCMP_CMP_EQ"}}}}});
  p["syscalls"].push_back(
      {{"names", {"ioctl"}},
       {"action", "SCMP_ACT_ERRNO"},
       {"errnoRet", kEperm},
       {"args", {{{"index", 1}, {"value", kTioclinux}, {"op", "SCMP_CMP_EQ"}}}}});
  return p.dump(1) + "\n";
}

std::string ContainersConf() {
  rlimit nofile{};
  int64_t files = 1024;
  if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_max != RLIM_INFINITY) {
    files = static_cast<int64_t>(nofile.rlim_max);
  } else {
    files = 1048576;
  }
  files = std::min<int64_t>(files, 1048576);
  return absl::StrCat(
      "# Written by weftd (executor/container_runtime.h); podman reads it through\n"
      "# CONTAINERS_CONF for the containers weft starts. Not the host's configuration.\n"
      "[containers]\n"
      "default_ulimits = [\"nofile=",
      files, ":", files, "\", \"nproc=", kPodmanNprocCeiling, ":", kPodmanNprocCeiling,
      "\"]\n"
      "[engine]\n"
      "runtime = \"runc\"\n"
      "events_logger = \"file\"\n");
}

absl::StatusOr<std::unique_ptr<PodmanRuntime>> PodmanRuntime::Create(Options options) {
  if (::access(options.podman.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(options.podman, " is not installed (Debian packages podman and runc; ",
                     "scripts/install-deps.sh installs them), or choose weftd --runtime bwrap"));
  }
  if (::geteuid() != 0) {
    return absl::FailedPreconditionError(
        "the podman runtime needs weftd to run as root (it starts rootful containers, each "
        "under its job's own uid); run weftd as root, or choose --runtime bwrap");
  }
  if (::access("/usr/sbin/runc", X_OK) != 0 && ::access("/usr/bin/runc", X_OK) != 0) {
    return absl::FailedPreconditionError(
        "runc is not installed (Debian package runc): podman's crun cannot run containers on a "
        "host with cgroup v1 and v2 mounted together");
  }
  ASSIGN_OR_RETURN(std::string engine_profile, ReadFile(kEngineProfile));
  ASSIGN_OR_RETURN(std::string profile, SeccompProfile(engine_profile));
  RETURN_IF_ERROR(MakeDirs(options.config_dir));
  RETURN_IF_ERROR(WriteFileAtomic(options.config_dir + "/containers.conf", ContainersConf()));
  RETURN_IF_ERROR(WriteFileAtomic(options.config_dir + "/seccomp.json", profile));
  RETURN_IF_ERROR(MakeDirs(options.config_dir + "/pids"));
  auto runtime = std::unique_ptr<PodmanRuntime>(new PodmanRuntime(std::move(options), ""));
  absl::StatusOr<CommandResult> version =
      RunCommand({runtime->options_.podman, "--version"}, runtime->EngineEnvironment(), 30000);
  if (!version.ok() || version->exit_code != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        runtime->options_.podman,
        " --version failed: ", version.ok() ? version->output : version.status().message()));
  }
  runtime->version_ = std::string(absl::StripAsciiWhitespace(version->output));
  return runtime;
}

absl::StatusOr<std::unique_ptr<PodmanRuntime>> PodmanRuntime::Open(Options options) {
  if (::access(options.podman.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(options.podman, " is not installed"));
  }
  const std::string profile = options.config_dir + "/seccomp.json";
  if (::access(profile.c_str(), R_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("weft's seccomp profile ", profile, " is missing (weftd writes it at start)"));
  }
  return std::unique_ptr<PodmanRuntime>(new PodmanRuntime(std::move(options), ""));
}

std::string PodmanRuntime::InitPidFile(const std::string& name) const {
  return absl::StrCat(options_.config_dir, "/pids/", name);
}

namespace {

// The fields of /proc/<pid>/status, name -> value; empty when the process is gone.
std::map<std::string, std::string, std::less<>> ProcStatus(pid_t pid) {
  std::map<std::string, std::string, std::less<>> fields;
  absl::StatusOr<std::string> text = ReadFile(absl::StrCat("/proc/", pid, "/status"));
  if (!text.ok()) return fields;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    fields.emplace(line.substr(0, colon), absl::StripAsciiWhitespace(line.substr(colon + 1)));
  }
  return fields;
}

// Whether a signal mask of /proc/<pid>/status (hexadecimal) has `signal`.
bool HasSignal(const std::string& mask, int signal) {
  uint64_t bits = 0;
  return absl::SimpleHexAtoi(mask, &bits) && ((bits >> (signal - 1)) & 1) != 0;
}

}  // namespace

ContainerRuntime::Signalled PodmanRuntime::SignalInit(const std::string& name, int signal) const {
  absl::StatusOr<std::string> text = ReadFile(InitPidFile(name));
  if (!text.ok()) return Signalled::kNotStarted;  // podman writes it once the container runs
  pid_t pid = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &pid) || pid <= 1) {
    return Signalled::kNotStarted;
  }
  // Its command line is read first: an init that is exiting has none (its memory is released
  // before it becomes a zombie), and neither has runc's process for an instant while it sets the
  // container up. The status read after it tells the two apart: an exiting init has no memory.
  const absl::StatusOr<std::string> cmdline = ReadFile(absl::StrCat("/proc/", pid, "/cmdline"));
  // Still that container's init, not a process that got its pid since: pid 1 of a namespace of
  // its own, alive (not a zombie, its memory not released), running podman's init.
  const auto status = ProcStatus(pid);
  const auto field = [&](absl::string_view key) {
    auto it = status.find(key);
    return it == status.end() ? std::string() : it->second;
  };
  const std::vector<absl::string_view> nspid =
      absl::StrSplit(field("NSpid"), absl::ByAnyChar(" \t"), absl::SkipEmpty());
  if (nspid.size() < 2 || nspid.back() != "1" || absl::StartsWith(field("State"), "Z") ||
      status.count("VmSize") == 0) {
    return Signalled::kEnded;
  }
  // Before podman's init runs, runc's own process holds the pid, setting the container up; and
  // the kernel drops a signal to a namespace's init that neither blocks nor handles it (the
  // first instants of catatonit).
  if (!cmdline.ok() || absl::string_view(*cmdline).substr(0, cmdline->find('\0')) != kInitProgram ||
      (signal != 0 && !HasSignal(field("SigBlk"), signal) && !HasSignal(field("SigCgt"), signal))) {
    return Signalled::kNotStarted;
  }
  return ::kill(pid, signal) == 0 ? Signalled::kInit : Signalled::kEnded;
}

void PodmanRuntime::Forget(const std::string& name) const { ::unlink(InitPidFile(name).c_str()); }

RuntimeCommand PodmanRuntime::KillCommand(const std::string& name) const {
  return {{options_.podman, "kill", "--signal", "KILL", name}, EngineEnvironment(), ""};
}

absl::Status PodmanRuntime::HasProgram(const std::string& image, const std::string& program,
                                       const std::string& path) const {
  absl::StatusOr<CommandResult> mounted =
      RunCommand({options_.podman, "image", "mount", image}, EngineEnvironment(), 120000);
  if (!mounted.ok() || mounted->exit_code != 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot look into image ", image, ": ",
        mounted.ok() ? absl::StripAsciiWhitespace(mounted->output) : mounted.status().message()));
  }
  const std::string root(absl::StripAsciiWhitespace(mounted->output));
  const int root_fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  std::vector<std::string> candidates;
  if (program.find('/') != std::string::npos) {
    candidates.push_back(program);
  } else {
    for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
      candidates.push_back(absl::StrCat(dir, "/", program));
    }
  }
  bool found = false;
  for (const std::string& c : candidates) {
    if (root_fd < 0) break;
    // Resolved as the container would: its links and ".." never leave the image's root.
    open_how how{};
    how.flags = O_PATH | O_CLOEXEC;
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
    const int fd = static_cast<int>(::syscall(SYS_openat2, root_fd, c.c_str(), &how, sizeof how));
    if (fd < 0) continue;
    struct stat st {};
    found = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111) != 0;
    ::close(fd);
    if (found) break;
  }
  if (root_fd >= 0) ::close(root_fd);
  (void)RunCommand({options_.podman, "image", "unmount", image}, EngineEnvironment(), 60000);
  if (root_fd < 0) return absl::UnavailableError(absl::StrCat("cannot open ", root));
  if (found) return absl::OkStatus();
  return absl::NotFoundError(absl::StrCat(
      "'", program, "' is not an executable file in the image",
      program.find('/') == std::string::npos ? absl::StrCat(" (looked in ", path, ")") : ""));
}

std::string PodmanRuntime::Describe() const {
  return absl::StrCat(version_.empty() ? "podman" : version_,
                      " with runc: every learner in a container of its job's uid, no "
                      "capabilities, no-new-privileges, seccomp (no user namespaces), read-only "
                      "root, its gang's network only");
}

std::vector<std::string> PodmanRuntime::EngineEnvironment() const {
  return {kEnginePath, absl::StrCat("CONTAINERS_CONF=", options_.config_dir, "/containers.conf"),
          "LANG=C.UTF-8"};
}

namespace {

// podman's flags for the cgroups, limits and devices of `s`.
void AppendLimits(const ContainerSpec& s, std::vector<std::string>& a) {
  if (!s.cgroup_parent.empty()) a.push_back(absl::StrCat("--cgroup-parent=", s.cgroup_parent));
  if (s.memory_bytes > 0) {
    a.push_back(absl::StrCat("--memory=", s.memory_bytes));
    a.push_back(absl::StrCat("--memory-swap=", s.memory_bytes));
  }
  if (s.cpus > 0) a.push_back(absl::StrCat("--cpus=", s.cpus));
  if (!s.cpuset.empty()) a.push_back(absl::StrCat("--cpuset-cpus=", absl::StrJoin(s.cpuset, ",")));
  if (s.pids_limit > 0) a.push_back(absl::StrCat("--pids-limit=", s.pids_limit));
  for (const std::string& d : s.devices) a.push_back(absl::StrCat("--device=", d));
}

}  // namespace

absl::StatusOr<RuntimeCommand> PodmanRuntime::Command(const ContainerSpec& s) const {
  if (!SafeName(s.name)) {
    return absl::InvalidArgumentError(absl::StrCat("container name '", s.name, "' is not safe"));
  }
  if (s.image.empty() || s.argv.empty()) {
    return absl::InvalidArgumentError("a container needs an image and a program");
  }
  RuntimeCommand c;
  c.env = EngineEnvironment();
  std::vector<std::string>& a = c.argv;
  a = {options_.podman,
       "run",
       "--rm",
       "--name",
       s.name,
       "--pull=never",
       "--init",  // kInitProgram
       "--log-driver=passthrough",
       "--cap-drop=ALL",
       "--security-opt=no-new-privileges",
       absl::StrCat("--security-opt=seccomp=", options_.config_dir, "/seccomp.json"),
       "--read-only",
       "--umask=0077",  // what it writes in its job's directory is its uid's alone
       absl::StrCat("--user=", s.uid, ":", s.uid),
       "--hostname=weft-learner",
       "--no-hosts"};
  if (s.host_network) {
    a.push_back("--network=host");
  } else if (!s.network_namespace.empty()) {
    RETURN_IF_ERROR(CheckMountPath(s.network_namespace));
    a.push_back(absl::StrCat("--network=ns:", s.network_namespace));
  } else {
    a.push_back("--network=none");
  }
  // (Where weftd did not make the directory, on a node its launch script reached, not at all:
  // SignalInit then leaves the signal to the engine's process.)
  if (s.record_init_pid && ::access(InitPidFile("").c_str(), W_OK) == 0) {
    ::unlink(InitPidFile(s.name).c_str());  // one an earlier weftd left under this name
    a.push_back(absl::StrCat("--pidfile=", InitPidFile(s.name)));
  }
  if (s.stdin_input) a.push_back("--interactive");
  AppendLimits(s, a);
  for (const auto& [k, v] : s.labels) {
    if (!SafeName(k) || !SafeName(v)) {
      return absl::InvalidArgumentError(absl::StrCat("label ", k, "=", v, " is not safe"));
    }
    a.push_back(absl::StrCat("--label=", k, "=", v));
  }
  for (const ContainerMount& m : s.mounts) {
    RETURN_IF_ERROR(CheckMountPath(m.source));
    RETURN_IF_ERROR(CheckMountPath(m.target));
    a.push_back(absl::StrCat("--volume=", m.source, ":", m.target, m.read_only ? ":ro" : ":rw"));
  }
  if (!s.work_dir.empty()) {
    RETURN_IF_ERROR(CheckMountPath(s.work_dir));
    a.push_back(absl::StrCat("--workdir=", s.work_dir));
  }
  // The environment by name only: the values travel in podman's own environment (which /proc
  // shows to root alone), never on its command line (which /proc shows to everyone).
  for (const auto& [name, value] : s.env) {
    if (!SafeName(name) || name.find('.') != std::string::npos ||
        value.find('\0') != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("environment variable '", name, "' is not a plain name"));
    }
    if (EngineVariable(name)) {  // PATH, LANG: the engine's own, and no secret
      a.push_back(absl::StrCat("--env=", name, "=", value));
    } else {
      a.push_back(absl::StrCat("--env=", name));
      c.env.push_back(absl::StrCat(name, "=", value));
    }
  }
  a.push_back(s.image);
  a.insert(a.end(), s.argv.begin(), s.argv.end());
  return c;
}

}  // namespace weft
