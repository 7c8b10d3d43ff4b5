// The live model of every active job (scheduler/live_job_model.h): throughput per world size and
// the learning curve, fed by rank 0's reports as they arrive and rebuilt from the store's metric
// series the first time weftd meets a job after it (re)starts. The scheduling round reads copies,
// and so do `weft queue`'s estimates, so neither waits for the other.
//
// Thread-safety: safe to call from any thread.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "job/job.h"
#include "job/job_spec.h"
#include "scheduler/cluster.h"
#include "scheduler/live_job_model.h"
#include "store/store.h"

namespace weft {

class JobModels {
 public:
  // The most metric points read back from the store to rebuild one job's model.
  static constexpr int64_t kRebuildPoints = 2000;

  explicit JobModels(Store& store) : store_(store) {}

  // One report of rank 0 of `job` (as stored before the report, with its current attempt's
  // learners): `points` as the learner sent them and its `progress` after them. A point's sample
  // count is taken as progress.samples less the steps since it at the current world size.
  void Observe(const JobRecord& job, const JobSpec& spec, const std::vector<MetricRecord>& points,
               const JobProgress& progress);
  // The deliver target of `id` was met (its delivered model was committed).
  void MarkDelivered(const std::string& id);
  // A copy of the model of `job`, built first if weftd has none (from its stored metrics: each
  // point's samples ≈ step × batch_size × its learners now, which is exact for a fixed gang).
  scheduler::LiveJobModel Get(const JobRecord& job, const JobSpec& spec);
  // Drops the model of a job that ended or was deleted.
  void Forget(const std::string& id);

 private:
  scheduler::LiveJobModel& EnsureLocked(const JobRecord& job, const JobSpec& spec)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Store& store_;
  absl::Mutex mu_;
  std::map<std::string, scheduler::LiveJobModel> models_ ABSL_GUARDED_BY(mu_);
};

// Where `job` stands against its targets for the scheduler: kNone without a deliver target,
// kDelivered once it was met (by the store's record or the model's evaluations).
scheduler::TargetState TargetStateOf(const JobRecord& job, const JobSpec& spec,
                                     const scheduler::LiveJobModel& model);

}  // namespace weft
