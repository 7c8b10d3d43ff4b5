#include "common/tls_identity.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <functional>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace weft {
namespace {

template <typename T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using KeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using CertPtr = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using BioPtr = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;
using ExtPtr = std::unique_ptr<X509_EXTENSION, Deleter<X509_EXTENSION, X509_EXTENSION_free>>;

absl::Status OpenSslError(std::string_view what) {
  return absl::InternalError(absl::StrCat("OpenSSL could not ", std::string(what)));
}

bool ValidName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!absl::ascii_islower(c) && !absl::ascii_isdigit(c) && c != '.' && c != '-') return false;
  }
  return true;
}

// Serial: the first 16 bytes of the public key with the top bit cleared (positive, RFC 5280
// §4.1.2.2), so that two identities never share one.
bool SetSerial(X509* cert, EVP_PKEY* key) {
  unsigned char pub[32];
  size_t len = sizeof pub;
  if (EVP_PKEY_get_raw_public_key(key, pub, &len) != 1 || len != sizeof pub) return false;
  pub[0] &= 0x7f;
  BIGNUM* bn = BN_bin2bn(pub, 16, nullptr);
  const bool ok = bn != nullptr && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert)) != nullptr;
  BN_free(bn);
  return ok;
}

bool AddExtension(X509* cert, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  ExtPtr ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
  return ext != nullptr && X509_add_ext(cert, ext.get(), -1) == 1;
}

absl::StatusOr<std::string> Pem(const std::function<int(BIO*)>& write) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr || write(bio.get()) != 1) return OpenSslError("write PEM");
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(len));
}

}  // namespace

absl::StatusOr<TlsIdentity> DeterministicTlsIdentity(std::string_view seed, std::string_view name) {
  if (seed.size() != 32) return absl::InvalidArgumentError("a TLS identity's seed is 32 bytes");
  if (!ValidName(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", std::string(name), "' is not a DNS name of 1-64 characters [a-z0-9.-]"));
  }
  KeyPtr key(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr,
                                          reinterpret_cast<const unsigned char*>(seed.data()), 32));
  CertPtr cert(X509_new());
  if (key == nullptr || cert == nullptr) return OpenSslError("make an Ed25519 key");
  X509_NAME* subject = X509_get_subject_name(cert.get());
  const std::string cn(name);
  if (X509_set_version(cert.get(), 2) != 1 || !SetSerial(cert.get(), key.get()) ||
      ASN1_TIME_set_string_X509(X509_getm_notBefore(cert.get()), "20000101000000Z") != 1 ||
      ASN1_TIME_set_string_X509(X509_getm_notAfter(cert.get()), "99991231235959Z") != 1 ||
      X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                                 0) != 1 ||
      X509_set_issuer_name(cert.get(), subject) != 1 ||
      X509_set_pubkey(cert.get(), key.get()) != 1 ||
      !AddExtension(cert.get(), NID_basic_constraints, "critical,CA:FALSE") ||
      !AddExtension(cert.get(), NID_key_usage, "critical,digitalSignature") ||
      !AddExtension(cert.get(), NID_ext_key_usage, "serverAuth") ||
      !AddExtension(cert.get(), NID_subject_alt_name, absl::StrCat("DNS:", std::string(name)))) {
    return OpenSslError("build a certificate");
  }
  // Ed25519 takes no separate digest; its signature is a function of key and message.
  if (X509_sign(cert.get(), key.get(), nullptr) <= 0) return OpenSslError("sign a certificate");
  TlsIdentity out;
  auto cert_pem = Pem([&](BIO* b) { return PEM_write_bio_X509(b, cert.get()); });
  auto key_pem = Pem([&](BIO* b) {
    return PEM_write_bio_PrivateKey(b, key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  });
  if (!cert_pem.ok()) return cert_pem.status();
  if (!key_pem.ok()) return key_pem.status();
  out.cert_pem = std::move(*cert_pem);
  out.key_pem = std::move(*key_pem);
  return out;
}

}  // namespace weft
