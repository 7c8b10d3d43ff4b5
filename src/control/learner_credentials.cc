#include "control/learner_credentials.h"

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

}  // namespace weft
