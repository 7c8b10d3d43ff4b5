#include "train/command_files.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace weft::train {
namespace {

absl::Status Errno(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

}  // namespace

int OpenBeneath(int dir_fd, const std::string& rel, int flags, mode_t mode) {
  open_how how{};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC | O_NOFOLLOW);
  how.mode = (flags & O_CREAT) ? mode : 0;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
  return static_cast<int>(::syscall(SYS_openat2, dir_fd, rel.c_str(), &how, sizeof how));
}

absl::StatusOr<int> OpenAnnounced(int work_fd, const std::string& rel, const char* what) {
  int fd = OpenBeneath(work_fd, rel, O_RDONLY | O_NONBLOCK);
  if (fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", rel, "' cannot be read: ", std::strerror(errno)));
  }
  if (absl::Status s = CheckAnnounced(fd, rel, what); !s.ok()) {
    ::close(fd);
    return s;
  }
  return fd;
}

absl::Status CheckAnnounced(int fd, const std::string& rel, const char* what) {
  struct stat st {};
  std::string problem;
  if (::fstat(fd, &st) != 0) problem = std::strerror(errno);
  if (problem.empty() && !S_ISREG(st.st_mode)) problem = "it is not a regular file";
  if (problem.empty() && st.st_nlink != 1) problem = "it has other hard links";
  if (problem.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, " '", rel, "' cannot be read: ", problem));
}

absl::StatusOr<int64_t> CopyDurably(int in, const std::string& dest, int64_t max_bytes,
                                    uid_t owner) {
  struct stat st {};
  if (::fstat(in, &st) != 0) return Errno("fstat");
  if (!S_ISREG(st.st_mode)) return absl::InvalidArgumentError("is not a regular file");
  if (st.st_size > max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("is ", st.st_size, " bytes; at most ", max_bytes));
  }
  const std::string tmp = dest + ".tmp";
  int out = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (out < 0) return Errno(absl::StrCat("cannot create ", tmp));
  int64_t total = 0;
  char buf[1 << 16];
  absl::Status s;
  while (s.ok()) {
    ssize_t n = ::read(in, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) s = Errno("read");
    if (n <= 0) break;
    total += n;
    if (total > max_bytes) s = absl::InvalidArgumentError("grew past the limit while copied");
    for (ssize_t off = 0; s.ok() && off < n;) {
      ssize_t w = ::write(out, buf + off, static_cast<size_t>(n - off));
      if (w < 0 && errno != EINTR) s = Errno(absl::StrCat("cannot write ", tmp));
      if (w > 0) off += w;
    }
  }
  if (s.ok() && owner != static_cast<uid_t>(-1) && ::fchown(out, owner, -1) != 0) {
    s = Errno("fchown");
  }
  if (s.ok() && ::fsync(out) != 0) s = Errno(absl::StrCat("cannot fsync ", tmp));
  ::close(out);
  if (s.ok() && ::rename(tmp.c_str(), dest.c_str()) != 0) s = Errno("rename");
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  const std::string dir = std::filesystem::path(dest).parent_path();
  if (int d = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); d >= 0) {
    ::fsync(d);
    ::close(d);
  }
  return total;
}

}  // namespace weft::train
