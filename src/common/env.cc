#include "common/env.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/failpoint.h"
#include "common/file_tree.h"
#include "common/files.h"
#include "common/status_macros.h"

namespace weft {
namespace {

namespace fs = std::filesystem;

absl::Status ErrnoStatus(int e, const std::string& what, const std::string& path) {
  std::string msg = absl::StrCat(what, " ", path, ": ", std::strerror(e));
  if (e == ENOENT) return absl::NotFoundError(msg);
  if (e == ENOSPC || e == EDQUOT) return absl::ResourceExhaustedError(msg);
  return absl::InternalError(msg);
}

class PosixWritableFile : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }

  absl::Status Append(std::string_view data) override {
    while (!data.empty()) {
      ssize_t n = ::write(fd_, data.data(), data.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus(errno, "cannot write", path_);
      }
      data.remove_prefix(static_cast<size_t>(n));
    }
    return absl::OkStatus();
  }
  absl::Status Sync() override {
    if (::fsync(fd_) != 0) return ErrnoStatus(errno, "fsync failed for", path_);
    return absl::OkStatus();
  }
  absl::Status Close() override {
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return ErrnoStatus(errno, "cannot close", path_);
    return absl::OkStatus();
  }

 private:
  const std::string path_;
  int fd_;
};

class PosixEnv : public Env {
 public:
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path,
                                                                int mode) override {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0) return ErrnoStatus(errno, "cannot create", path);
    ::fchmod(fd, mode);  // not widened by a umask, not narrowed below `mode`
    return std::make_unique<PosixWritableFile>(path, fd);
  }
  absl::Status RenameFile(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0)
      return ErrnoStatus(errno, "cannot rename onto", to);
    return absl::OkStatus();
  }
  absl::Status RemoveFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return ErrnoStatus(errno, "cannot remove", path);
    }
    return absl::OkStatus();
  }
  absl::Status SyncDir(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus(errno, "cannot open for fsync", path);
    int rc = ::fsync(fd);
    int e = errno;
    ::close(fd);
    if (rc != 0) return ErrnoStatus(e, "fsync failed for", path);
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> ReadFile(const std::string& path) override {
    std::ifstream in(path, std::ios::binary);
    if (!in) return ErrnoStatus(errno, "cannot open", path);
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) return ErrnoStatus(errno, "cannot read", path);
    return ss.str();
  }
  absl::StatusOr<int64_t> FileSize(const std::string& path) override {
    return RegularFileSize(path);
  }
  absl::Status MakeDirs(const std::string& path) override {
    std::error_code ec;
    fs::create_directories(path, ec);
    if (ec) return ErrnoStatus(ec.value(), "cannot create directory", path);
    return absl::OkStatus();
  }
  absl::Status RemoveAll(const std::string& path) override { return RemoveTree(path); }
  absl::StatusOr<std::vector<std::string>> ListFiles(const std::string& path) override {
    std::vector<std::string> names;
    std::error_code ec;
    fs::directory_iterator it(path, ec);
    if (ec == std::errc::no_such_file_or_directory) return names;
    for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
      std::error_code type_ec;
      if (it->is_regular_file(type_ec)) names.push_back(it->path().filename().string());
    }
    if (ec) return ErrnoStatus(ec.value(), "cannot list", path);
    return names;
  }
};

}  // namespace

Env& Env::Default() {
  static PosixEnv* env = new PosixEnv();
  return *env;
}

namespace {

// A temporary name beside `path` that no other writer of `path` uses at the same time: processes
// on other hosts sharing the file system (this host's name), other processes here (the pid) and
// other threads of this one (a counter). E.g. "ckpt-0000000100.pt.tmp.node-a.4242.7".
std::string TemporaryNameFor(const std::string& path) {
  static std::atomic<uint64_t> next{0};
  char host[65] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  std::string tag(host);
  for (char& c : tag) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') c = '_';
  }
  return absl::StrCat(path, ".tmp.", tag, ".", ::getpid(), ".", next.fetch_add(1));
}

}  // namespace

absl::Status WriteFileAtomic(Env& env, const std::string& path, const std::string& data, int mode) {
  fs::path target(path);
  const std::string dir = target.parent_path().empty() ? "." : target.parent_path().string();
  const std::string tmp = TemporaryNameFor(path);
  absl::StatusOr<std::unique_ptr<WritableFile>> file = env.NewWritableFile(tmp, mode);
  if (!file.ok()) return file.status();
  absl::Status s = (*file)->Append(data);
  if (s.ok()) s = (*file)->Sync();
  absl::Status closed = (*file)->Close();
  if (s.ok()) s = closed;
  if (s.ok()) {
    Failpoint("atomic-write-before-rename");
    s = env.RenameFile(tmp, path);
  }
  if (!s.ok()) {
    env.RemoveFile(tmp).IgnoreError();
    return s;
  }
  return env.SyncDir(dir);
}

absl::Status LinkOrCopyFile(Env& env, const std::string& from, const std::string& to) {
  if (::link(from.c_str(), to.c_str()) == 0) return absl::OkStatus();
  if (errno != EXDEV && errno != EPERM) return ErrnoStatus(errno, "cannot link", to);
  ASSIGN_OR_RETURN(std::string data, env.ReadFile(from));
  return WriteFileAtomic(env, to, data);
}

}  // namespace weft
