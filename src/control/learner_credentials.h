// Per-attempt, per-role credentials: HMAC-SHA256 (RFC 2104) of "<role>:<job id>:<attempt>" under
// the secret weftd keeps in <data-dir>/learner.key, so weftd can hand one out again after a
// restart without storing it, and adopted learners keep authenticating. A credential is useless
// for any other job, for any other attempt of its own job (a learner of an attempt that ended,
// or its tenant's code that kept it, is turned away), for the other role and for the REST API;
// learners never see tenant or admin tokens. The roles: kLearner ("weft-learner") is what the
// coordinator accepts; kParameterServer ("weft-ps") is what a job's weft-ps shards accept from
// its learners and the only one weft-ps holds, so a shard cannot act as a learner at weftd.
//
// Thread-safety: immutable after construction.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/tls_identity.h"

namespace weft {

enum class CredentialRole { kLearner, kParameterServer };

class LearnerCredentials {
 public:
  // `key` empty: no credentials (unit tests that never meet a learner); every check fails.
  explicit LearnerCredentials(std::string key) : key_(std::move(key)) {}

  // The credential of job `job_id`'s attempt `attempt` in `role` (64 hex characters), empty
  // without a key.
  std::string For(const std::string& job_id, int64_t attempt,
                  CredentialRole role = CredentialRole::kLearner) const;
  // Whether `credential` is that attempt's learners' (kLearner: the coordinator's check),
  // compared in constant time. False without a key: a weftd that lost its key refuses every
  // learner rather than accepting any.
  bool Check(const std::string& job_id, int64_t attempt, const std::string& credential) const;
  // The TLS identity job `job_id`'s attempt `attempt` gives its weft-ps shards, for DNS name
  // `name`: DeterministicTlsIdentity seeded with HMAC-SHA256 of "weft-ps-tls:<job>:<attempt>",
  // so the same after a restart. FailedPrecondition without a key; the identity's errors.
  absl::StatusOr<TlsIdentity> ParameterServerTls(const std::string& job_id, int64_t attempt,
                                                 const std::string& name) const;

 private:
  const std::string key_;
};

}  // namespace weft
