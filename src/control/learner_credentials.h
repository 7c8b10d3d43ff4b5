// Per-job learner credentials: HMAC-SHA256 (RFC 2104) of "weft-learner:<job id>" under the
// secret weftd keeps in <data-dir>/learner.key, so weftd can hand one out again after a restart
// without storing it, and adopted learners keep authenticating. A credential is useless for any
// other job and for the REST API; learners never see tenant or admin tokens.
//
// Thread-safety: immutable after construction.
#pragma once

#include <string>

namespace weft {

class LearnerCredentials {
 public:
  // `key` empty: no credentials (unit tests); every check passes.
  explicit LearnerCredentials(std::string key) : key_(std::move(key)) {}

  // Job `job_id`'s credential (64 hex characters), empty without a key.
  std::string For(const std::string& job_id) const;
  // Whether `credential` is job `job_id`'s, compared in constant time.
  bool Check(const std::string& job_id, const std::string& credential) const;

 private:
  const std::string key_;
};

}  // namespace weft
