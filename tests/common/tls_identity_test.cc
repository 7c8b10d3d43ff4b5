// DeterministicTlsIdentity: the same seed gives the same certificate and key, byte for byte
// (weftd hands an attempt's identity out again after a restart), another seed another identity,
// and the certificate is a well-formed self-signed Ed25519 server certificate for its name.
#include "common/tls_identity.h"

#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

using ::testing::HasSubstr;

X509* ParseCert(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  return cert;
}

EVP_PKEY* ParseKey(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  return key;
}

TEST(TlsIdentityTest, TheSameSeedGivesTheSameBytesAndAnotherSeedAnotherIdentity) {
  const std::string seed(32, 'a');
  auto a = DeterministicTlsIdentity(seed, "weft-ps");
  auto again = DeterministicTlsIdentity(seed, "weft-ps");
  auto other = DeterministicTlsIdentity(std::string(31, 'a') + "b", "weft-ps");
  ASSERT_TRUE(a.ok() && again.ok() && other.ok()) << a.status();
  EXPECT_EQ(a->cert_pem, again->cert_pem);
  EXPECT_EQ(a->key_pem, again->key_pem);
  EXPECT_NE(a->cert_pem, other->cert_pem);
  EXPECT_NE(a->key_pem, other->key_pem);
  EXPECT_THAT(a->cert_pem, HasSubstr("-----BEGIN CERTIFICATE-----"));
  EXPECT_THAT(a->key_pem, HasSubstr("-----BEGIN PRIVATE KEY-----"));
}

TEST(TlsIdentityTest, TheCertificateIsSelfSignedForItsNameAndMatchesItsKey) {
  auto id = DeterministicTlsIdentity(std::string(32, '\x07'), "weft-ps");
  ASSERT_TRUE(id.ok()) << id.status();
  X509* cert = ParseCert(id->cert_pem);
  EVP_PKEY* key = ParseKey(id->key_pem);
  ASSERT_NE(cert, nullptr);
  ASSERT_NE(key, nullptr);
  EXPECT_EQ(EVP_PKEY_get_id(key), EVP_PKEY_ED25519);
  EXPECT_EQ(X509_check_private_key(cert, key), 1);
  EVP_PKEY* pub = X509_get0_pubkey(cert);
  EXPECT_EQ(X509_verify(cert, pub), 1);  // signed by its own key
  EXPECT_EQ(X509_check_host(cert, "weft-ps", 0, 0, nullptr), 1);
  EXPECT_NE(X509_check_host(cert, "localhost", 0, 0, nullptr), 1);
  EXPECT_GT(X509_cmp_current_time(X509_get0_notAfter(cert)), 0);
  EXPECT_LT(X509_cmp_current_time(X509_get0_notBefore(cert)), 0);
  EVP_PKEY_free(key);
  X509_free(cert);
}

TEST(TlsIdentityTest, ABadSeedOrNameIsRefused) {
  EXPECT_TRUE(absl::IsInvalidArgument(DeterministicTlsIdentity("short", "weft-ps").status()));
  for (const char* name : {"", "Weft-PS", "weft ps", "a/b"}) {
    EXPECT_TRUE(
        absl::IsInvalidArgument(DeterministicTlsIdentity(std::string(32, 'a'), name).status()))
        << name;
  }
}

}  // namespace
}  // namespace weft
