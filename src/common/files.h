// Small filesystem helpers with the durability weft promises: a file written with
// WriteFileAtomic is either the old content or the new one after a crash, never a mix.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace weft {

// Reads a whole file. NotFound if it does not exist; Internal on other I/O errors.
absl::StatusOr<std::string> ReadFile(const std::string& path);

// Writes `data` to `path` atomically and durably: temporary file in the same directory,
// fsync, rename over `path`, fsync of the directory. Internal on any I/O error.
// `mode` is the new file's permission bits (0600 for secrets).
absl::Status WriteFileAtomic(const std::string& path, const std::string& data, int mode = 0644);

// fsyncs a file (or directory) by path. Internal on error.
absl::Status FsyncPath(const std::string& path);

// Creates `path` and missing parents (mode 0755). Internal on error.
absl::Status MakeDirs(const std::string& path);

// Removes `path` recursively; OK if it does not exist.
absl::Status RemoveAll(const std::string& path);

// Size in bytes, or NotFound.
absl::StatusOr<int64_t> FileSize(const std::string& path);

// SHA-256 of `data` as 64 lower-case hex characters.
std::string Sha256Hex(const std::string& data);

// HMAC-SHA256 of `message` under `key` as 64 lower-case hex characters (RFC 2104, OpenSSL).
std::string HmacSha256Hex(const std::string& key, const std::string& message);

// Compares two strings in time independent of where they differ (OpenSSL CRYPTO_memcmp).
bool ConstantTimeEquals(const std::string& a, const std::string& b);

}  // namespace weft
