#include "train/audit_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "job/audit.h"

namespace weft::train {

absl::StatusOr<std::unique_ptr<AuditLog>> AuditLog::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot open the audit ", path, ": ", std::strerror(errno)));
  }
  std::unique_ptr<AuditLog> log(new AuditLog(fd));
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size == 0) {
    log->Write(absl::StrCat(kAuditHeader, "\n"));
  } else if (st.st_size > 0) {
    char last = '\n';
    if (::pread(fd, &last, 1, st.st_size - 1) == 1 && last != '\n') log->Write("\n");
  }
  return log;
}

AuditLog::~AuditLog() { ::close(fd_); }

void AuditLog::Write(const std::string& record) {
  size_t done = 0;
  while (done < record.size()) {
    const ssize_t n = ::write(fd_, record.data() + done, record.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (!failed_) spdlog::warn("cannot append to the audit: {}", std::strerror(errno));
      failed_ = true;
      return;
    }
    done += static_cast<size_t>(n);
  }
}

void AuditLog::Resume(int64_t step) { Write(AuditResumeRecord(step)); }

void AuditLog::BeginEpoch(int64_t epoch, int64_t samples) {
  Write(AuditEpochRecord(epoch, samples));
}

void AuditLog::Step(int64_t step, int64_t epoch, const torch::Tensor& indices) {
  torch::Tensor i = indices.to(torch::kInt64).contiguous();
  Write(AuditStepRecord(step, epoch, i.data_ptr<int64_t>(), i.numel()));
}

}  // namespace weft::train
