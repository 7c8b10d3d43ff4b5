// BwrapRuntime (executor/container_runtime.h): a learner under Debian's bubblewrap.
#include <unistd.h>

#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "executor/container_runtime.h"

namespace weft {
namespace {

constexpr char kBwrap[] = "/usr/bin/bwrap";
constexpr char kSetpriv[] = "/usr/bin/setpriv";  // util-linux
constexpr char kPrlimit[] = "/usr/bin/prlimit";  // util-linux

absl::Status CheckPath(const std::string& path) {
  if (path.empty() || path[0] != '/' || path.find('\n') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("path '", path, "' must be absolute"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<BwrapRuntime>> BwrapRuntime::Create() {
  for (const char* tool : {kBwrap, kSetpriv, kPrlimit}) {
    if (::access(tool, X_OK) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(tool, " is not installed (Debian packages bubblewrap, util-linux)"));
    }
  }
  if (::geteuid() != 0) {
    return absl::FailedPreconditionError(
        "the bwrap runtime needs weftd to run as root (each job runs as a uid of its own, and a "
        "gang shares a network namespace); run weftd as root, or choose --runtime none");
  }
  return std::unique_ptr<BwrapRuntime>(new BwrapRuntime());
}

std::string BwrapRuntime::Describe() const {
  return "bubblewrap: every learner in a sandbox of its job's uid, no capabilities, "
         "no-new-privileges, the host's root read-only, weftd's data directory hidden, its "
         "gang's network only (no seccomp filter, no CPU quota)";
}

absl::StatusOr<RuntimeCommand> BwrapRuntime::Command(const ContainerSpec& s) const {
  if (s.argv.empty()) return absl::InvalidArgumentError("a sandbox needs a program");
  RuntimeCommand c;
  std::vector<std::string>& a = c.argv;
  a = {kBwrap, "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"};
  for (const char* dir : {"/tmp", "/var/tmp"})
    a.insert(a.end(), {"--perms", "1777", "--tmpfs", dir});
  // Modes given, not left to the umask bubblewrap runs under (weftd's 077 would make a hidden
  // directory's path to the job's own files unreadable to the job's uid).
  for (const char* dir : {"/run", "/home", "/root"})
    a.insert(a.end(), {"--perms", "0755", "--tmpfs", dir});
  for (const std::string& dir : s.hidden) {
    RETURN_IF_ERROR(CheckPath(dir));
    a.insert(a.end(), {"--perms", "0755", "--tmpfs", dir});
  }
  std::set<std::string> made;
  for (const ContainerMount& m : s.mounts) {
    RETURN_IF_ERROR(CheckPath(m.source));
    RETURN_IF_ERROR(CheckPath(m.target));
    for (const std::string& dir : s.hidden) {
      // Each directory between a hidden one and the mount, made in its tmpfs, searchable.
      if (!absl::StartsWith(m.target, dir + "/")) continue;
      for (size_t i = m.target.find('/', dir.size() + 1); i != std::string::npos;
           i = m.target.find('/', i + 1)) {
        if (made.insert(m.target.substr(0, i)).second) {
          a.insert(a.end(), {"--perms", "0755", "--dir", m.target.substr(0, i)});
        }
      }
    }
    a.insert(a.end(), {m.read_only ? "--ro-bind" : "--bind", m.source, m.target});
  }
  a.insert(a.end(), {"--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try",
                     "--hostname", "weft-learner", "--as-pid-1"});
  if (s.host_network) {
    // the host's network: nothing to do
  } else if (!s.network_namespace.empty()) {
    c.join_network_namespace = s.network_namespace;  // the caller joins it before bubblewrap
  } else {
    a.push_back("--unshare-net");
  }
  if (!s.work_dir.empty()) a.insert(a.end(), {"--chdir", s.work_dir});
  a.push_back("--");
  if (s.pids_limit > 0) {
    a.insert(a.end(), {kPrlimit, absl::StrCat("--nproc=", s.pids_limit, ":", s.pids_limit), "--"});
  }
  a.insert(a.end(),
           {kSetpriv, absl::StrCat("--reuid=", s.uid), absl::StrCat("--regid=", s.uid),
            "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"});
  a.insert(a.end(), s.argv.begin(), s.argv.end());
  // The program's whole environment is bubblewrap's, which passes it on.
  for (const auto& [name, value] : s.env) c.env.push_back(absl::StrCat(name, "=", value));
  return c;
}

}  // namespace weft
