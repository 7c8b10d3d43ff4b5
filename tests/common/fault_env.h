// An Env over the real filesystem that fails chosen writes the way a full or failing disk does
// (in the spirit of LevelDB's fault-injection Env): the next `count` files created at a path
// containing `pattern` take half of their first write and then fail it with `error`; and the next
// `count` removals (RemoveAll) of a path containing a removal pattern fail, removing nothing.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/env.h"

namespace weft::testing {

class FaultInjectionEnv : public Env {
 public:
  explicit FaultInjectionEnv(Env& base = Env::Default()) : base_(base) {}

  void FailWrites(std::string pattern, int count,
                  absl::Status error = absl::ResourceExhaustedError("No space left on device")) {
    absl::MutexLock lock(&mu_);
    pattern_ = std::move(pattern);
    remaining_ = count;
    error_ = std::move(error);
  }
  void FailRemovals(std::string pattern, int count) {
    absl::MutexLock lock(&mu_);
    removal_pattern_ = std::move(pattern);
    removals_to_fail_ = count;
  }
  // Writes failed so far.
  int injected() const {
    absl::MutexLock lock(&mu_);
    return injected_;
  }

  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path,
                                                                int mode) override {
    auto file = base_.NewWritableFile(path, mode);
    if (!file.ok()) return file;
    absl::MutexLock lock(&mu_);
    if (remaining_ <= 0 || path.find(pattern_) == std::string::npos) return file;
    --remaining_;
    ++injected_;
    return std::unique_ptr<WritableFile>(new Failing(std::move(*file), error_));
  }
  absl::Status RenameFile(const std::string& from, const std::string& to) override {
    return base_.RenameFile(from, to);
  }
  absl::Status RemoveFile(const std::string& path) override { return base_.RemoveFile(path); }
  absl::Status SyncDir(const std::string& path) override { return base_.SyncDir(path); }
  absl::StatusOr<std::string> ReadFile(const std::string& path) override {
    return base_.ReadFile(path);
  }
  absl::StatusOr<int64_t> FileSize(const std::string& path) override {
    return base_.FileSize(path);
  }
  absl::Status MakeDirs(const std::string& path) override { return base_.MakeDirs(path); }
  absl::Status RemoveAll(const std::string& path) override {
    {
      absl::MutexLock lock(&mu_);
      if (removals_to_fail_ > 0 && path.find(removal_pattern_) != std::string::npos) {
        --removals_to_fail_;
        return absl::InternalError(absl::StrCat("cannot remove ", path, ": Permission denied"));
      }
    }
    return base_.RemoveAll(path);
  }
  absl::StatusOr<std::vector<std::string>> ListFiles(const std::string& path) override {
    return base_.ListFiles(path);
  }

 private:
  // Takes half of the first write, then fails it and everything after.
  class Failing : public WritableFile {
   public:
    Failing(std::unique_ptr<WritableFile> file, absl::Status error)
        : file_(std::move(file)), error_(std::move(error)) {}
    absl::Status Append(std::string_view data) override {
      if (!failed_) file_->Append(data.substr(0, data.size() / 2)).IgnoreError();
      failed_ = true;
      return error_;
    }
    absl::Status Sync() override { return failed_ ? error_ : file_->Sync(); }
    absl::Status Close() override { return file_->Close(); }

   private:
    std::unique_ptr<WritableFile> file_;
    absl::Status error_;
    bool failed_ = false;
  };

  Env& base_;
  mutable absl::Mutex mu_;
  std::string pattern_ ABSL_GUARDED_BY(mu_);
  int remaining_ ABSL_GUARDED_BY(mu_) = 0;
  int injected_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  std::string removal_pattern_ ABSL_GUARDED_BY(mu_);
  int removals_to_fail_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace weft::testing
