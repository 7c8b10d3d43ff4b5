#include "control/learner_credentials.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"

namespace weft {

std::string LearnerCredentials::For(const std::string& job_id, int64_t attempt,
                                    CredentialRole role) const {
  if (key_.empty()) return "";
  const char* name = role == CredentialRole::kLearner ? "weft-learner" : "weft-ps";
  return HmacSha256Hex(key_, absl::StrCat(name, ":", job_id, ":", attempt));
}

bool LearnerCredentials::Check(const std::string& job_id, int64_t attempt,
                               const std::string& credential) const {
  if (key_.empty()) return false;
  return ConstantTimeEquals(For(job_id, attempt), credential);
}

absl::StatusOr<TlsIdentity> LearnerCredentials::ParameterServerTls(const std::string& job_id,
                                                                   int64_t attempt,
                                                                   const std::string& name) const {
  if (key_.empty()) return absl::FailedPreconditionError("no learner key to derive TLS from");
  const std::string seed = absl::HexStringToBytes(
      HmacSha256Hex(key_, absl::StrCat("weft-ps-tls:", job_id, ":", attempt)));
  return DeterministicTlsIdentity(seed, name);
}

}  // namespace weft
