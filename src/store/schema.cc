#include "store/schema.h"

#include <algorithm>
#include <array>

#include "absl/strings/str_replace.h"

namespace weft::schema {
namespace {

// One change to the schema. Types are written as {int} (64-bit), {real} (double), {bool} and
// {serial} (a 64-bit key the database assigns in increasing order); the dialect spells them.
struct Change {
  int sqlite_version;  // the SQLite version this change is part of; 0: not in SQLite
  int pg_version;      // the PostgreSQL version; 0: not in PostgreSQL
  const char* sql;
};

constexpr std::array kChanges = {
    // Jobs, their history, metrics and models (then called artifacts).
    Change{1, 1, R"sql(
CREATE TABLE IF NOT EXISTS jobs (
  id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  name TEXT NOT NULL,
  state TEXT NOT NULL,
  reason TEXT NOT NULL,
  manifest TEXT NOT NULL,
  spec_json TEXT NOT NULL,
  created_ms {int} NOT NULL,
  updated_ms {int} NOT NULL,
  attempt {int} NOT NULL,
  node TEXT NOT NULL,
  learner_pid {int} NOT NULL,
  epoch {int} NOT NULL,
  epochs_total {int} NOT NULL,
  step {int} NOT NULL,
  steps_total {int} NOT NULL,
  samples {int} NOT NULL,
  best_test_accuracy {real},
  deliver_met_ms {int},
  complete_met_ms {int}
);
CREATE INDEX IF NOT EXISTS jobs_by_tenant ON jobs(tenant, created_ms);
CREATE TABLE IF NOT EXISTS job_events (
  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  seq {int} NOT NULL,
  time_ms {int} NOT NULL,
  from_state TEXT,
  to_state TEXT NOT NULL,
  reason TEXT NOT NULL,
  PRIMARY KEY (job_id, seq)
);
CREATE TABLE IF NOT EXISTS metrics (
  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  seq {serial},
  step {int} NOT NULL,
  epoch {int} NOT NULL,
  wall_time_ms {int} NOT NULL,
  train_loss {real} NOT NULL,
  samples_per_s {real} NOT NULL,
  test_accuracy {real},
  test_loss {real}
);
CREATE INDEX IF NOT EXISTS metrics_by_job ON metrics(job_id, seq);
CREATE TABLE IF NOT EXISTS artifacts (
  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  path TEXT NOT NULL,
  card_path TEXT NOT NULL,
  test_accuracy {real} NOT NULL,
  epoch {int} NOT NULL,
  step {int} NOT NULL,
  bytes {int} NOT NULL,
  created_ms {int} NOT NULL,
  PRIMARY KEY (job_id, kind)
);
)sql"},
    // Restart counts and checkpoints (fault tolerance).
    Change{2, 1, R"sql(
ALTER TABLE jobs ADD COLUMN restarts {int} NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS checkpoints (
  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  step {int} NOT NULL,
  epoch {int} NOT NULL,
  path TEXT NOT NULL,
  bytes {int} NOT NULL,
  created_ms {int} NOT NULL,
  PRIMARY KEY (job_id, step)
);
)sql"},
    // Tenants and their bearer tokens (digests only).
    Change{3, 1, R"sql(
CREATE TABLE IF NOT EXISTS tenants (
  name TEXT PRIMARY KEY,
  has_quota {bool} NOT NULL,
  quota_cpus {real} NOT NULL,
  quota_memory_mb {int} NOT NULL,
  quota_gpus {int} NOT NULL,
  weight {real} NOT NULL,
  created_ms {int} NOT NULL
);
CREATE TABLE IF NOT EXISTS tokens (
  id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  sha256 TEXT NOT NULL UNIQUE,
  created_ms {int} NOT NULL,
  revoked_ms {int}
);
)sql"},
    // A job's learners (node and pid per rank) as JSON; `node` and `learner_pid` keep rank 0's
    // for readers of SQLite's version 3.
    Change{4, 1, R"sql(
ALTER TABLE jobs ADD COLUMN learners TEXT NOT NULL DEFAULT '[]';
)sql"},
    // Control rounds read only the jobs that are not settled.
    Change{5, 1, R"sql(
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs(state, created_ms);
)sql"},
    // A job's delivered and final models move to `models`; `artifacts` now holds the files
    // tenants upload (by name, content stored once per tenant by SHA-256).
    Change{6, 1, R"sql(
ALTER TABLE artifacts RENAME TO models;
)sql"},
    // PostgreSQL names a table's constraints after it: the renamed table's take its new name,
    // so that the new `artifacts` gets the name `artifacts_pkey`.
    Change{0, 1, R"sql(
ALTER TABLE models RENAME CONSTRAINT artifacts_pkey TO models_pkey;
ALTER TABLE models RENAME CONSTRAINT artifacts_job_id_fkey TO models_job_id_fkey;
)sql"},
    Change{6, 1, R"sql(
CREATE TABLE artifacts (
  tenant TEXT NOT NULL,
  name TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  bytes {int} NOT NULL,
  created_ms {int} NOT NULL,
  PRIMARY KEY (tenant, name)
);
CREATE INDEX artifacts_by_digest ON artifacts(tenant, sha256);
)sql"},
    // Data sets the admin registers; manifests name them instead of host paths. `tenants` is
    // "*" for every tenant, else their names joined by ','.
    Change{7, 1, R"sql(
CREATE TABLE datasets (
  name TEXT PRIMARY KEY,
  path TEXT NOT NULL,
  format TEXT NOT NULL,
  tenants TEXT NOT NULL,
  created_ms {int} NOT NULL
);
)sql"},
    // A tenant's disk quota (NULL: weftd's default).
    Change{8, 1, R"sql(
ALTER TABLE tenants ADD COLUMN disk_quota_mb {int};
)sql"},
    // Tenants' webhooks and the outbox of deliveries owed to them. `events` is the state names
    // joined by ','. A delivery outlives its job (it tells of the job's past); it goes with its
    // webhook. `state`: 0 owed, 1 delivered, 2 given up.
    Change{9, 1, R"sql(
CREATE TABLE webhooks (
  id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  url TEXT NOT NULL,
  events TEXT NOT NULL,
  secret TEXT NOT NULL,
  created_ms {int} NOT NULL,
  last_status TEXT NOT NULL DEFAULT '',
  last_attempt_ms {int}
);
CREATE INDEX webhooks_by_tenant ON webhooks(tenant, created_ms);
CREATE TABLE webhook_deliveries (
  id {serial},
  webhook_id TEXT NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
  job_id TEXT NOT NULL,
  tenant TEXT NOT NULL,
  event TEXT NOT NULL,
  from_state TEXT,
  reason TEXT NOT NULL,
  time_ms {int} NOT NULL,
  attempts {int} NOT NULL DEFAULT 0,
  next_attempt_ms {int} NOT NULL,
  state {int} NOT NULL DEFAULT 0
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries(state, next_attempt_ms);
CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries(webhook_id, state);
)sql"},
    // Leader election among weftd sharing a PostgreSQL database (store/leadership.h): one lease
    // row with the holder and its fencing epoch, the members' addresses, and each history entry
    // stamped with the epoch of the leader that wrote it. A SQLite store has one weftd.
    Change{0, 2, R"sql(
CREATE TABLE weft_leader (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  holder TEXT NOT NULL,
  epoch BIGINT NOT NULL,
  expires_at TIMESTAMPTZ NOT NULL
);
INSERT INTO weft_leader (id, holder, epoch, expires_at) VALUES (1, '', 0, '-infinity');
CREATE TABLE weft_members (
  name TEXT PRIMARY KEY,
  api TEXT NOT NULL,
  coordinator TEXT NOT NULL,
  seen_at TIMESTAMPTZ NOT NULL
);
ALTER TABLE job_events ADD COLUMN leader_epoch BIGINT NOT NULL DEFAULT 0;
)sql"},
    // The membership generation of a job's current attempt and the id its next learner gets
    // (job/job.h JobRecord).
    Change{10, 3, R"sql(
ALTER TABLE jobs ADD COLUMN generation {int} NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN next_learner_id INTEGER NOT NULL DEFAULT 0;
)sql"},
    // Container images (job/job.h ImageRecord); tenant '' is the admin.
    Change{11, 4, R"sql(
CREATE TABLE images (
  tenant TEXT NOT NULL,
  name TEXT NOT NULL,
  reference TEXT NOT NULL,
  digest TEXT NOT NULL,
  format TEXT NOT NULL,
  bytes {int} NOT NULL,
  tenants TEXT NOT NULL,
  created_ms {int} NOT NULL,
  PRIMARY KEY (tenant, name)
);
)sql"},
    // Experiments (job/job.h ExperimentRecord), and each trial's link from its job.
    Change{12, 5, R"sql(
CREATE TABLE experiments (
  id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  name TEXT NOT NULL,
  state TEXT NOT NULL,
  reason TEXT NOT NULL,
  manifest TEXT NOT NULL,
  search_state TEXT NOT NULL,
  revision {int} NOT NULL,
  best_job TEXT NOT NULL,
  best_metric {real},
  delivered_job TEXT NOT NULL,
  deliver_met_ms {int},
  complete_met_ms {int},
  created_ms {int} NOT NULL,
  updated_ms {int} NOT NULL
);
CREATE INDEX experiments_by_tenant ON experiments(tenant, created_ms);
CREATE INDEX experiments_by_state ON experiments(state, created_ms);
ALTER TABLE jobs ADD COLUMN experiment TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN trial {int} NOT NULL DEFAULT -1;
CREATE INDEX jobs_by_experiment ON jobs(experiment, trial);
)sql"},
    // GPU time: a job's learners that have left it (JobRecord::gpu_ms), and a tenant's deleted
    // jobs' (TenantRecord::deleted_jobs_gpu_ms).
    Change{13, 6, R"sql(
ALTER TABLE jobs ADD COLUMN gpu_ms {int} NOT NULL DEFAULT 0;
ALTER TABLE tenants ADD COLUMN deleted_jobs_gpu_ms {int} NOT NULL DEFAULT 0;
)sql"},
    // Learner time: a job's learners that have left it (JobRecord::learner_ms), the service it
    // attained before its current learners; and the world size a metric point's throughput was
    // measured at (MetricRecord::world_size).
    Change{14, 7, R"sql(
ALTER TABLE jobs ADD COLUMN learner_ms {int} NOT NULL DEFAULT 0;
ALTER TABLE metrics ADD COLUMN world_size {int} NOT NULL DEFAULT 0;
)sql"},
};

// Each dialect's versions appear in order, from 1 and without gaps, so that migration `to` is
// the changes of version `to` and a store at version v has every change up to v.
constexpr bool InOrder(bool sqlite) {
  int last = 0;
  for (const Change& change : kChanges) {
    const int v = sqlite ? change.sqlite_version : change.pg_version;
    if (v == 0) continue;
    if (v != last && v != last + 1) return false;
    last = v;
  }
  return last > 0;
}
static_assert(InOrder(true) && InOrder(false));

int VersionOf(const Change& change, Dialect dialect) {
  return dialect == Dialect::kSqlite ? change.sqlite_version : change.pg_version;
}

std::string Spelled(const char* sql, Dialect dialect) {
  if (dialect == Dialect::kSqlite) {
    return absl::StrReplaceAll(sql, {{"{int}", "INTEGER"},
                                     {"{real}", "REAL"},
                                     {"{bool}", "INTEGER"},
                                     {"{serial}", "INTEGER PRIMARY KEY AUTOINCREMENT"}});
  }
  return absl::StrReplaceAll(sql, {{"{int}", "BIGINT"},
                                   {"{real}", "DOUBLE PRECISION"},
                                   {"{bool}", "BOOLEAN"},
                                   {"{serial}", "BIGSERIAL PRIMARY KEY"}});
}

}  // namespace

int LatestVersion(Dialect dialect) {
  int latest = 0;
  for (const Change& change : kChanges) latest = std::max(latest, VersionOf(change, dialect));
  return latest;
}

std::string Migration(Dialect dialect, int to) {
  std::string sql;
  for (const Change& change : kChanges) {
    if (to >= 1 && VersionOf(change, dialect) == to) sql += Spelled(change.sql, dialect);
  }
  return sql;
}

}  // namespace weft::schema
