#include "executor/network_namespaces.h"

#include <dirent.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/status_macros.h"

namespace weft {
namespace {

constexpr long kNsfsMagic = 0x6e736673;  // linux/magic.h NSFS_MAGIC

bool SafeName(const std::string& s) {
  return !s.empty() && s.size() <= 200 && s[0] != '.' &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) {
           return std::isalnum(c) || c == '_' || c == '.' || c == '-';
         });
}

bool Pinned(const std::string& path) {
  struct statfs fs {};
  return ::statfs(path.c_str(), &fs) == 0 && fs.f_type == kNsfsMagic;
}

// The child's side: a new network namespace, its loopback up, pinned at `path`. Only system
// calls (the caller has threads). Exits with the failing step's errno, 0 when pinned.
[[noreturn]] void MakeAndPin(const char* path) {
  if (::unshare(CLONE_NEWNET) != 0) ::_exit(errno == 0 ? 1 : errno);
  const int sock = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ifreq ifr{};
  std::memcpy(ifr.ifr_name, "lo", 3);
  if (sock < 0 || ::ioctl(sock, SIOCGIFFLAGS, &ifr) != 0) ::_exit(errno == 0 ? 1 : errno);
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP | IFF_RUNNING);
  if (::ioctl(sock, SIOCSIFFLAGS, &ifr) != 0) ::_exit(errno == 0 ? 1 : errno);
  if (::mount("/proc/self/ns/net", path, nullptr, MS_BIND, nullptr) != 0) {
    ::_exit(errno == 0 ? 1 : errno);
  }
  ::_exit(0);
}

}  // namespace

absl::StatusOr<std::string> NetworkNamespaces::Create(const std::string& name) const {
  if (!SafeName(name)) {
    return absl::InvalidArgumentError(absl::StrCat("network namespace name '", name, "'"));
  }
  const std::string path = Path(name);
  if (Pinned(path)) return path;  // an earlier weftd's, its learners adopted
  RETURN_IF_ERROR(MakeDirs(dir_));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  }
  ::close(fd);
  const pid_t pid = ::fork();
  if (pid == 0) MakeAndPin(path.c_str());
  if (pid < 0) {
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    ::unlink(path.c_str());
    return absl::InternalError(absl::StrCat(
        "cannot make the network namespace ", path, ": ",
        WIFEXITED(status) ? std::strerror(WEXITSTATUS(status)) : "its helper was killed",
        " (a gang's namespace needs root)"));
  }
  return path;
}

absl::Status NetworkNamespaces::Remove(const std::string& name) const {
  if (!SafeName(name)) {
    return absl::InvalidArgumentError(absl::StrCat("network namespace name '", name, "'"));
  }
  const std::string path = Path(name);
  if (Pinned(path) && ::umount2(path.c_str(), MNT_DETACH) != 0) {
    return absl::InternalError(absl::StrCat("cannot unpin ", path, ": ", std::strerror(errno)));
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return absl::InternalError(absl::StrCat("cannot remove ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

int NetworkNamespaces::RemoveAllBut(const std::vector<std::string>& in_use) const {
  DIR* d = ::opendir(dir_.c_str());
  if (d == nullptr) return 0;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (SafeName(n) && std::find(in_use.begin(), in_use.end(), n) == in_use.end()) {
      names.push_back(n);
    }
  }
  ::closedir(d);
  int removed = 0;
  for (const std::string& n : names) removed += Remove(n).ok();
  return removed;
}

}  // namespace weft
