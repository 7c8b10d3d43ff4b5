#include "common/files.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "absl/strings/str_format.h"
#include "common/env.h"

namespace weft {

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
