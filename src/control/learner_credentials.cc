#include "control/learner_credentials.h"

#include "common/files.h"

namespace weft {

std::string LearnerCredentials::For(const std::string& job_id) const {
  if (key_.empty()) return "";
  return HmacSha256Hex(key_, "weft-learner:" + job_id);
}

bool LearnerCredentials::Check(const std::string& job_id, const std::string& credential) const {
  if (key_.empty()) return true;
  return ConstantTimeEquals(For(job_id), credential);
}

}  // namespace weft
