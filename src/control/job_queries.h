// The jobs as the API reads them: each read takes its caller and answers NotFound for another
// tenant's job, as if it did not exist (the admin reads every job), so that no route can show
// one tenant's job to another by forgetting a check.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "control/tenancy.h"
#include "job/job.h"
#include "store/store.h"

namespace weft {

// Thread-safety: safe to call from any thread (the store serializes); it holds no state.
class JobQueries {
 public:
  explicit JobQueries(Store& store) : store_(store) {}

  // Job `id`. NotFound when there is none or it is not the caller's.
  absl::StatusOr<JobRecord> Find(const Caller& caller, const std::string& id) const;
  // The caller's jobs (every tenant's for the admin) in creation order, one `page` of them
  // (Store::ListJobs).
  absl::StatusOr<std::vector<JobRecord>> List(const Caller& caller, const JobPage& page) const;
  // Job `id` with its history, its latest `metrics_limit` metric points and its models, as of
  // one instant (Store::GetJobSnapshot). NotFound as Find.
  absl::StatusOr<Store::JobSnapshot> Snapshot(const Caller& caller, const std::string& id,
                                              int64_t metrics_limit) const;
  // Points [from, from + limit) of job `id`'s metric series (Store::MetricRange). NotFound as
  // Find.
  absl::StatusOr<Store::MetricPage> Metrics(const Caller& caller, const std::string& id,
                                            int64_t from, int64_t limit) const;
  // Job `id`'s models. NotFound as Find.
  absl::StatusOr<std::vector<ModelRecord>> Models(const Caller& caller,
                                                  const std::string& id) const;
  // Every tenant's jobs that are not settled (Store::ListActiveJobs): what a metrics scrape
  // counts. Only for the admin's routes.
  absl::StatusOr<std::vector<JobRecord>> Active() const { return store_.ListActiveJobs(); }

 private:
  Store& store_;
};

}  // namespace weft
