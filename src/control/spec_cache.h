// The typed spec of every job weftd knows, parsed once: from the manifest when it is submitted,
// from the stored canonical JSON when weftd recovers (or the first time a job is asked about).
// Every room of weftd reads a job's spec here, never its text.
//
// Thread-safety: safe to call from any thread.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "job/job.h"
#include "job/job_spec.h"

namespace weft {

class SpecCache {
 public:
  using SpecPtr = std::shared_ptr<const JobSpec>;

  void Put(const std::string& id, JobSpec spec);
  // The spec of `job`: the cached one, or parsed once from `job.spec_json`. Internal if the
  // stored spec does not parse (weftd wrote it, so that is a bug or a damaged store).
  absl::StatusOr<SpecPtr> Get(const JobRecord& job);
  void Erase(const std::string& id);
  // The world size of `job`'s current attempt: its gang's learners once placed (an elastic
  // job's may be any size in its range), else its spec's resources.learners (1 if the spec
  // cannot be read).
  int WorldSize(const JobRecord& job);

 private:
  absl::Mutex mu_;
  std::map<std::string, SpecPtr> specs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace weft
