// The writing side of a job's data audit (job/audit.h): rank 0 appends one record per applied
// step. Each record is one write(2) on a file opened O_APPEND, mode 0600, so a learner killed
// at any instant leaves at most its last record torn, which the check counts as rolled back.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace weft::train {

class AuditLog {
 public:
  // Opens (creating it with the header) the audit at `path`; a torn last record gets its '\n' so
  // the next record starts a line. Errors from the filesystem.
  static absl::StatusOr<std::unique_ptr<AuditLog>> Open(const std::string& path);
  ~AuditLog();
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  // This attempt resumed from the checkpoint of `step` (0: from scratch).
  void Resume(int64_t step);
  // Epoch `epoch` (1-based) of a data set of `samples` samples begins or goes on.
  void BeginEpoch(int64_t epoch, int64_t samples);
  // Step `step` of epoch `epoch` was applied; `indices` (int64 [k]) are the samples it trained.
  void Step(int64_t step, int64_t epoch, const torch::Tensor& indices);

 private:
  explicit AuditLog(int fd) : fd_(fd) {}
  void Write(const std::string& record);

  int fd_;
  bool failed_ = false;  // a write failed: logged once, then the audit goes on without it
};

}  // namespace weft::train
