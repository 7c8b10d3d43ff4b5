#include "control/job_queries.h"

#include "absl/strings/str_cat.h"

namespace weft {

namespace {

bool Visible(const Caller& caller, const JobRecord& job) {
  return caller.admin || job.tenant == caller.tenant;
}

absl::Status NoSuchJob(const std::string& id) {
  return absl::NotFoundError(absl::StrCat("no job '", id, "'"));
}

}  // namespace

absl::StatusOr<JobRecord> JobQueries::Find(const Caller& caller, const std::string& id) const {
  absl::StatusOr<JobRecord> job = store_.GetJob(id);
  if (job.ok() && !Visible(caller, *job)) return NoSuchJob(id);
  return job;
}

absl::StatusOr<std::vector<JobRecord>> JobQueries::List(const Caller& caller,
                                                        const JobPage& page) const {
  return store_.ListJobs(caller.admin ? "" : caller.tenant, page);
}

absl::StatusOr<Store::JobSnapshot> JobQueries::Snapshot(const Caller& caller, const std::string& id,
                                                        int64_t metrics_limit) const {
  absl::StatusOr<Store::JobSnapshot> read = store_.GetJobSnapshot(id, metrics_limit);
  if (read.ok() && !Visible(caller, read->job)) return NoSuchJob(id);
  return read;
}

absl::StatusOr<Store::MetricPage> JobQueries::Metrics(const Caller& caller, const std::string& id,
                                                      int64_t from, int64_t limit) const {
  if (absl::StatusOr<JobRecord> job = Find(caller, id); !job.ok()) return job.status();
  return store_.MetricRange(id, from, limit);
}

absl::StatusOr<std::vector<ModelRecord>> JobQueries::Models(const Caller& caller,
                                                            const std::string& id) const {
  if (absl::StatusOr<JobRecord> job = Find(caller, id); !job.ok()) return job.status();
  return store_.Models(id);
}

}  // namespace weft
