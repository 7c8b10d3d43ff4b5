// A TLS identity that is a pure function of a secret: an Ed25519 key (RFC 8032) whose private
// key is the 32-byte seed, in a self-signed X.509 v3 certificate whose every field is derived
// from it (Ed25519 signatures are deterministic). weftd derives one per job attempt from its
// learner key (HMAC, like the credentials), so it hands out the same identity again after a
// restart without storing a private key; the attempt's weft-ps servers present it, and its
// learners trust exactly that certificate (pinned as their only root), so it opens nothing for
// any other attempt or job. See docs/security.md.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace weft {

struct TlsIdentity {
  std::string cert_pem;  // "-----BEGIN CERTIFICATE-----": public, what the peers pin
  std::string key_pem;   // PKCS #8 "-----BEGIN PRIVATE KEY-----": the server's only
};

// The identity of `seed` (exactly 32 bytes, secret) for DNS name `name` (the certificate's
// subject CN and its only subjectAltName; 1–64 characters of [a-z0-9.-]), valid from 2000 to
// 9999 (it is pinned, not chained: what ends it is the attempt's end). The same arguments give
// the same bytes. InvalidArgument for a bad seed or name; Internal if OpenSSL fails.
absl::StatusOr<TlsIdentity> DeterministicTlsIdentity(std::string_view seed, std::string_view name);

}  // namespace weft
