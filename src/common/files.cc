#include "common/files.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/env.h"

namespace weft {

int OpenNoSymlinks(const std::string& path, int flags) {
  open_how how{};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
  how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(::syscall(SYS_openat2, AT_FDCWD, path.c_str(), &how, sizeof how));
}

absl::StatusOr<int64_t> RegularFileSize(const std::string& path) {
  const int fd = OpenNoSymlinks(path, O_RDONLY | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat(path, " does not exist"));
    return absl::InvalidArgumentError(
        absl::StrCat("cannot open ", path, ": ",
                     err == ELOOP ? "a symbolic link lies on its path" : strerror(err)));
  }
  struct stat st {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  ::close(fd);
  if (!regular) return absl::InvalidArgumentError(absl::StrCat(path, " is not a regular file"));
  return static_cast<int64_t>(st.st_size);
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  return Env::Default().ReadFile(path);
}

absl::Status WriteFileAtomic(const std::string& path, const std::string& data, int mode) {
  return WriteFileAtomic(Env::Default(), path, data, mode);
}

absl::Status MakeDirs(const std::string& path) { return Env::Default().MakeDirs(path); }

absl::Status RemoveAll(const std::string& path) { return Env::Default().RemoveAll(path); }

absl::StatusOr<int64_t> FileSize(const std::string& path) { return Env::Default().FileSize(path); }

std::string Sha256Hex(const std::string& data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  std::string out;
  out.reserve(len * 2);
  for (unsigned int i = 0; i < len; ++i) absl::StrAppendFormat(&out, "%02x", md[i]);
  return out;
}

Sha256Stream::Sha256Stream() : ctx_(EVP_MD_CTX_new()) {
  EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr);
}

Sha256Stream::~Sha256Stream() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

void Sha256Stream::Update(std::string_view data) {
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data.data(), data.size());
}

std::string Sha256Stream::HexDigest() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), md, &len);
  std::string out;
  out.reserve(len * 2);
  for (unsigned int i = 0; i < len; ++i) absl::StrAppendFormat(&out, "%02x", md[i]);
  return out;
}

std::string HmacSha256Hex(const std::string& key, const std::string& message) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), md, &len);
  std::string out;
  out.reserve(len * 2);
  for (unsigned int i = 0; i < len; ++i) absl::StrAppendFormat(&out, "%02x", md[i]);
  return out;
}

bool ConstantTimeEquals(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace weft
