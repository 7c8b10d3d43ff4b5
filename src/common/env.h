// The filesystem as weft writes to it, behind an interface (LevelDB's Env): the real POSIX one
// for the product, and wrappers in tests that inject ENOSPC or EIO into chosen writes, so the
// error paths of every write that matters (specs, checkpoints, models, secrets) can be tested.
//
// Errors, from every method: NotFound for a missing file; ResourceExhausted when the disk or a
// quota is full (ENOSPC, EDQUOT); Internal for any other I/O error. Messages name the path and
// the system's reason. Thread-safety: implementations are safe to call from many threads.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace weft {

// A file open for writing. Not thread-safe.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual absl::Status Append(std::string_view data) = 0;
  virtual absl::Status Sync() = 0;  // fsync: durable once it returns OK
  virtual absl::Status Close() = 0;
};

class Env {
 public:
  virtual ~Env() = default;

  // The process's real filesystem.
  static Env& Default();

  // Creates or truncates `path` with exactly the permission bits `mode` (not widened by the
  // umask).
  virtual absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path,
                                                                        int mode) = 0;
  virtual absl::Status RenameFile(const std::string& from, const std::string& to) = 0;
  // Removes one file; OK if it does not exist.
  virtual absl::Status RemoveFile(const std::string& path) = 0;
  // fsyncs a directory, making the renames in it durable.
  virtual absl::Status SyncDir(const std::string& path) = 0;
  virtual absl::StatusOr<std::string> ReadFile(const std::string& path) = 0;
  // Size in bytes of the regular file at `path`, reached without a symbolic link (a job's
  // directory holds what its learner, the tenant's code, wrote). NotFound when missing;
  // InvalidArgument for a link on its path or a file that is not regular.
  virtual absl::StatusOr<int64_t> FileSize(const std::string& path) = 0;
  // Creates `path` and its missing parents (mode 0777 less the umask; weftd's is 077).
  virtual absl::Status MakeDirs(const std::string& path) = 0;
  // Removes `path` recursively, never following a link, however deep (common/file_tree.h:
  // RemoveTree); OK if it does not exist.
  virtual absl::Status RemoveAll(const std::string& path) = 0;
  // Names (not paths) of the regular files directly in `path`, in no particular order; empty if
  // `path` does not exist.
  virtual absl::StatusOr<std::vector<std::string>> ListFiles(const std::string& path) = 0;
};

// Writes `data` to `path` atomically and durably through `env`: a temporary file beside it,
// fsync, rename over `path`, fsync of the directory. After a crash `path` holds the old content
// or the new, never a mix; after an error the temporary file is gone and `path` is unchanged.
// `mode` is the new file's permission bits, exactly: owner-only unless asked otherwise. Errors
// as for Env.
absl::Status WriteFileAtomic(Env& env, const std::string& path, const std::string& data,
                             int mode = 0600);

// Makes `to` hold the content of `from`: a hard link when both are on one filesystem (no bytes
// copied; the content outlives `from`'s removal), else a copy through WriteFileAtomic (mode
// 0600). Errors as for Env; NotFound when `from` does not exist.
absl::Status LinkOrCopyFile(Env& env, const std::string& from, const std::string& to);

}  // namespace weft
