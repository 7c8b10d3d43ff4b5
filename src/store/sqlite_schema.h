// The SQLite store's schema (internal to store/): version 1's tables and each migration after
// it. A store is migrated forward in one transaction on open; PRAGMA user_version records the
// version, and a newer version than this weftd knows is refused.
#pragma once

namespace weft::sqlite {

inline constexpr int kSchemaVersion = 11;

inline constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS jobs (
  id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  name TEXT NOT NULL,
  state TEXT NOT NULL,
  reason TEXT NOT NULL,
  manifest TEXT NOT NULL,
  spec_json TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  node TEXT NOT NULL,
  learner_pid INTEGER NOT NULL,
  epoch INTEGER NOT NULL,
  epochs_total INTEGER NOT NULL,
  step INTEGER NOT NULL,
  steps_total INTEGER NOT NULL,
  samples INTEGER NOT NULL,
  best_test_accuracy REAL,
  deliver_met_ms INTEGER,
  complete_met_ms INTEGER
);
CREATE INDEX IF NOT EXISTS jobs_by_tenant ON jobs(tenant, created_ms);
CREATE TABLE IF NOT EXISTS job_events (
  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  seq INTEGER NOT NULL,
  time_ms INTEGER NOT NULL,
  from_state TEXT,
  to_state TEXT NOT NULL,
  reason TEXT NOT NULL,
  PRIMARY KEY (job_id, seq)
);
CREATE TABLE IF NOT EXISTS metrics (
  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  step INTEGER NOT NULL,
  epoch INTEGER NOT NULL,
  wall_time_ms INTEGER NOT NULL,
  train_loss REAL NOT NULL,
  samples_per_s REAL NOT NULL,
  test_accuracy REAL,
  test_loss REAL
);
CREATE INDEX IF NOT EXISTS metrics_by_job ON metrics(job_id, seq);
CREATE TABLE IF NOT EXISTS artifacts (
  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  path TEXT NOT NULL,
  card_path TEXT NOT NULL,
  test_accuracy REAL NOT NULL,
  epoch INTEGER NOT NULL,
  step INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  created_ms INTEGER NOT NULL,
  PRIMARY KEY (job_id, kind)
);
)sql";

// Version 2: restart counts and checkpoints (fault tolerance).
inline constexpr char kSchemaV2[] = R"sql(
ALTER TABLE jobs ADD COLUMN restarts INTEGER NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS checkpoints (
  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  step INTEGER NOT NULL,
  epoch INTEGER NOT NULL,
  path TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  created_ms INTEGER NOT NULL,
  PRIMARY KEY (job_id, step)
);
)sql";

// Version 4: a job's learners (node and pid per rank) as JSON; `node` and `learner_pid` keep
// rank 0's for readers of version 3.
inline constexpr char kSchemaV4[] = R"sql(
ALTER TABLE jobs ADD COLUMN learners TEXT NOT NULL DEFAULT '[]';
)sql";

// Version 3: tenants and their bearer tokens (digests only).
inline constexpr char kSchemaV3[] = R"sql(
CREATE TABLE IF NOT EXISTS tenants (
  name TEXT PRIMARY KEY,
  has_quota INTEGER NOT NULL,
  quota_cpus REAL NOT NULL,
  quota_memory_mb INTEGER NOT NULL,
  quota_gpus INTEGER NOT NULL,
  weight REAL NOT NULL,
  created_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS tokens (
  id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  sha256 TEXT NOT NULL UNIQUE,
  created_ms INTEGER NOT NULL,
  revoked_ms INTEGER
);
)sql";

// Version 5: control rounds read only the jobs that are not settled.
inline constexpr char kSchemaV5[] = R"sql(
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs(state, created_ms);
)sql";

// Version 6: a job's delivered and final models move to `models`; `artifacts` now holds the files
// tenants upload (by name, content stored once per tenant by SHA-256).
inline constexpr char kSchemaV6[] = R"sql(
ALTER TABLE artifacts RENAME TO models;
CREATE TABLE artifacts (
  tenant TEXT NOT NULL,
  name TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  created_ms INTEGER NOT NULL,
  PRIMARY KEY (tenant, name)
);
CREATE INDEX artifacts_by_digest ON artifacts(tenant, sha256);
)sql";

// Version 7: data sets the admin registers; manifests name them instead of host paths.
// `tenants` is "*" for every tenant, else their names joined by ','.
inline constexpr char kSchemaV7[] = R"sql(
CREATE TABLE datasets (
  name TEXT PRIMARY KEY,
  path TEXT NOT NULL,
  format TEXT NOT NULL,
  tenants TEXT NOT NULL,
  created_ms INTEGER NOT NULL
);
)sql";

// Version 8: a tenant's disk quota (NULL: weftd's default).
inline constexpr char kSchemaV8[] = R"sql(
ALTER TABLE tenants ADD COLUMN disk_quota_mb INTEGER;
)sql";

// Version 9: tenants' webhooks and the outbox of deliveries owed to them. `events` is the state
// names joined by ','. A delivery outlives its job (it tells of the job's past); it goes with
// its webhook. `state`: 0 owed, 1 delivered, 2 given up.
inline constexpr char kSchemaV9[] = R"sql(
CREATE TABLE webhooks (
  id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  url TEXT NOT NULL,
  events TEXT NOT NULL,
  secret TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  last_status TEXT NOT NULL DEFAULT '',
  last_attempt_ms INTEGER
);
CREATE INDEX webhooks_by_tenant ON webhooks(tenant, created_ms);
CREATE TABLE webhook_deliveries (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  webhook_id TEXT NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
  job_id TEXT NOT NULL,
  tenant TEXT NOT NULL,
  event TEXT NOT NULL,
  from_state TEXT,
  reason TEXT NOT NULL,
  time_ms INTEGER NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  next_attempt_ms INTEGER NOT NULL,
  state INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries(state, next_attempt_ms);
CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries(webhook_id, state);
)sql";

// Version 10: the membership generation of a job's current attempt and the id its next learner
// gets (job/job.h JobRecord).
inline constexpr char kSchemaV10[] = R"sql(
ALTER TABLE jobs ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN next_learner_id INTEGER NOT NULL DEFAULT 0;
)sql";

// Version 11: container images (job/job.h ImageRecord); tenant '' is the admin.
inline constexpr char kSchemaV11[] = R"sql(
CREATE TABLE images (
  tenant TEXT NOT NULL,
  name TEXT NOT NULL,
  reference TEXT NOT NULL,
  digest TEXT NOT NULL,
  format TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  tenants TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  PRIMARY KEY (tenant, name)
);
)sql";

// Migration i (0-based) takes a store from version i to version i + 1.
inline constexpr const char* kMigrations[] = {kSchema,   kSchemaV2,  kSchemaV3, kSchemaV4,
                                              kSchemaV5, kSchemaV6,  kSchemaV7, kSchemaV8,
                                              kSchemaV9, kSchemaV10, kSchemaV11};
static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == kSchemaVersion);

}  // namespace weft::sqlite
