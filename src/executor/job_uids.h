// The uid each job's containers run as: one per job with learners running, from a range weftd
// owns (weftd --first-job-uid, 65536 of them), so that no two jobs ever share one and none is a
// user of the host. A job holds its uid while any of its attempts holds it; a learner an earlier
// weftd started keeps the uid it runs as.
//
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace weft {

class JobUids {
 public:
  JobUids(uid_t first, int count) : first_(first), count_(count) {}

  // The uid of `job_id`, held once more: the one it holds, else `adopted` (a learner of an
  // earlier weftd runs as it), else the lowest free one. ResourceExhausted when every uid of the
  // range is held.
  absl::StatusOr<uid_t> Take(const std::string& job_id,
                             std::optional<uid_t> adopted = std::nullopt);
  // One hold of `job_id`'s uid ends; with the last, the uid is free again.
  void Release(const std::string& job_id);

 private:
  const uid_t first_;
  const int count_;
  absl::Mutex mu_;
  std::map<std::string, std::pair<uid_t, int>> held_ ABSL_GUARDED_BY(mu_);  // job -> (uid, holds)
};

}  // namespace weft
