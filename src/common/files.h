// Filesystem shorthands on the real filesystem (Env::Default(), common/env.h), for code with no
// reason to inject faults; code whose writes matter takes an Env. And hashing helpers.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace weft {

// Env::Default().ReadFile / MakeDirs / RemoveAll / FileSize, and WriteFileAtomic on it; errors
// as documented in common/env.h.
absl::StatusOr<std::string> ReadFile(const std::string& path);
absl::Status WriteFileAtomic(const std::string& path, const std::string& data, int mode = 0600);
absl::Status MakeDirs(const std::string& path);
absl::Status RemoveAll(const std::string& path);
absl::StatusOr<int64_t> FileSize(const std::string& path);

// Opens `path` (absolute) with `flags` (O_CLOEXEC added) refusing a symbolic link anywhere along
// it (openat2 RESOLVE_NO_SYMLINKS): for the files of a job's directory, where the job's learner —
// the tenant's code — can put a link in place of a file or a directory weftd reads. The
// descriptor, or -1 with errno set (ELOOP for a link).
int OpenNoSymlinks(const std::string& path, int flags);

// The size in bytes of the regular file at `path`, opened by OpenNoSymlinks. NotFound when it is
// missing; InvalidArgument when it is not a regular file or a link lies on its path.
absl::StatusOr<int64_t> RegularFileSize(const std::string& path);

// SHA-256 of `data` as 64 lower-case hex characters.
std::string Sha256Hex(const std::string& data);

// SHA-256 of data that arrives in pieces (an upload): Update as often as needed, then HexDigest
// once. Not thread-safe.
class Sha256Stream {
 public:
  Sha256Stream();
  ~Sha256Stream();
  Sha256Stream(const Sha256Stream&) = delete;
  Sha256Stream& operator=(const Sha256Stream&) = delete;
  void Update(std::string_view data);
  // 64 lower-case hex characters. Call once, after the last Update.
  std::string HexDigest();

 private:
  void* ctx_;  // EVP_MD_CTX
};

// HMAC-SHA256 of `message` under `key` as 64 lower-case hex characters (RFC 2104, OpenSSL).
std::string HmacSha256Hex(const std::string& key, const std::string& message);

// Compares two strings in time independent of where they differ (OpenSSL CRYPTO_memcmp).
bool ConstantTimeEquals(const std::string& a, const std::string& b);

}  // namespace weft
