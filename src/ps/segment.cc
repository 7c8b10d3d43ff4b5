#include "ps/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace weft::ps {
namespace {

absl::Status OsError(const std::string& what, const std::string& name, int err) {
  std::string message = absl::StrCat(what, " ", name, ": ", std::strerror(err));
  switch (err) {
    case EEXIST:
      return absl::AlreadyExistsError(message);
    case ENOENT:
      return absl::NotFoundError(message);
    case ENOSPC:
    case ENOMEM:
      return absl::ResourceExhaustedError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::StatusOr<void*> Map(int fd, size_t bytes, const std::string& name) {
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) return OsError("mmap", name, errno);
  return data;
}

}  // namespace

absl::StatusOr<std::string> SegmentNameForJob(std::string_view job_id, int attempt) {
  if (job_id.empty() || job_id.size() > 64) {
    return absl::InvalidArgumentError("job id: must be 1 to 64 bytes");
  }
  for (char c : job_id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_';
    if (!ok) return absl::InvalidArgumentError("job id: only [A-Za-z0-9_-] may name a segment");
  }
  if (attempt < 1) return absl::InvalidArgumentError("attempt: must be at least 1");
  return absl::StrCat("/weft-ps-", std::string(job_id), "-", attempt);
}

absl::StatusOr<SharedSegment> SharedSegment::Create(const std::string& name, size_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("a shared segment needs at least one byte");
  int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return OsError("shm_open", name, errno);
  // The umask cannot widen 0600, but an explicit fchmod keeps the mode independent of it.
  if (fchmod(fd, 0600) != 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    int err = errno;
    close(fd);
    shm_unlink(name.c_str());
    return OsError("sizing", name, err);
  }
  absl::StatusOr<void*> data = Map(fd, bytes, name);
  close(fd);
  if (!data.ok()) {
    shm_unlink(name.c_str());
    return data.status();
  }
  return SharedSegment(name, *data, bytes);
}

absl::StatusOr<SharedSegment> SharedSegment::Open(const std::string& name) {
  int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) return OsError("shm_open", name, errno);
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return OsError("fstat", name, err);
  }
  if (st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
    close(fd);
    return absl::PermissionDeniedError(
        absl::StrCat(name, ": not this user's owner-only segment; refusing to use it"));
  }
  if (st.st_size <= 0) {
    close(fd);
    // Created, and not yet sized by its creator.
    return absl::UnavailableError(
        absl::StrCat(name, ": empty segment (its server is creating it)"));
  }
  absl::StatusOr<void*> data = Map(fd, static_cast<size_t>(st.st_size), name);
  close(fd);
  if (!data.ok()) return data.status();
  return SharedSegment(name, *data, static_cast<size_t>(st.st_size));
}

absl::Status SharedSegment::Unlink(const std::string& name) {
  if (shm_unlink(name.c_str()) != 0) return OsError("shm_unlink", name, errno);
  return absl::OkStatus();
}

SharedSegment::SharedSegment(SharedSegment&& other) noexcept
    : name_(std::move(other.name_)), data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

SharedSegment& SharedSegment::operator=(SharedSegment&& other) noexcept {
  if (this != &other) {
    Reset();
    name_ = std::move(other.name_);
    data_ = other.data_;
    size_ = other.size_;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

SharedSegment::~SharedSegment() { Reset(); }

void SharedSegment::Reset() {
  if (data_ != nullptr) munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace weft::ps
