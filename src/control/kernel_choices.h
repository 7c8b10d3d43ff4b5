// The kernel choices a tenant's jobs share (job/kernel_cache.h): a new job's learners start with
// what the tenant's earlier jobs timed, and what they time is kept for the tenant's next jobs, so
// a search's trials (one model at a few batch sizes) time each layer shape once, not once per
// trial. A tenant's choices never reach another tenant's jobs.
#pragma once

#include <string>

#include "job/layout.h"

namespace weft {

// Writes `tenant`'s choices, if it has any, as job `id`'s LOG_DIR/kernels.tsv, where its
// learners read them. Called at admission, while the job's directory is still weftd's own (the
// executor gives it to the job's uid at each attempt's start). Best effort: a choice not seeded
// is timed again; a failure is logged, and the job goes on.
void SeedKernelChoices(const JobLayout& layout, const std::string& tenant, const std::string& id);

// Merges job `id`'s LOG_DIR/kernels.tsv — its learners', read as untrusted (job/kernel_cache.h) —
// into `tenant`'s file, its choices winning. Called when an attempt ends; best effort as Seed.
// One caller at a time (weftd's control loop): a merge reads the tenant's file and rewrites it.
void KeepKernelChoices(const JobLayout& layout, const std::string& tenant, const std::string& id);

}  // namespace weft
