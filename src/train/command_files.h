// Taking files over from a command job's program: its work directory is the tenant's, so every
// file weft-learner reads there (the metrics file, an announced checkpoint or model) is opened
// beneath it without following a link, and copied — durably, bounded — to the path weft derives.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace weft::train {

// Opens `rel` below the directory `dir_fd` without following any symbolic link and without
// leaving the directory (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS): the program controls
// WORK_DIR's contents, weft-learner may run as root. The descriptor, or -1 with errno set.
int OpenBeneath(int dir_fd, const std::string& rel, int flags, mode_t mode = 0);

// The file the program announced as its `what` ("checkpoint" or "model"), `rel` in WORK_DIR
// (OpenBeneath). InvalidArgument saying why when it cannot be read or is not a regular file of its
// own (a hard link may name a file from elsewhere).
absl::StatusOr<int> OpenAnnounced(int work_fd, const std::string& rel, const char* what);

// The checks OpenAnnounced makes of the open file `fd` (named `rel`): a regular file with no other
// hard link. InvalidArgument saying why not; the descriptor stays open either way.
absl::Status CheckAnnounced(int fd, const std::string& rel, const char* what);

// Copies the regular file open at `in` to `dest` (via a temporary file, fsync'd, renamed, the
// directory fsync'd), at most `max_bytes` bytes, owned by `owner` unless it is -1. Returns the
// bytes copied. InvalidArgument for a file that is not regular or is too large; Internal for
// what the file system refuses.
absl::StatusOr<int64_t> CopyDurably(int in, const std::string& dest, int64_t max_bytes,
                                    uid_t owner = static_cast<uid_t>(-1));

}  // namespace weft::train
