// The PostgreSQL store's schema (internal to store/): version 1's tables and each migration
// after it. The tables and columns are the SQLite store's (sqlite_schema.h) at its version 9, in
// PostgreSQL's types; the two schemas number their versions separately. A store is migrated
// forward in one transaction on open, holding an advisory lock so two weftd opening one
// database at once migrate it once; weft_schema holds the version, and a newer version than
// this weftd knows is refused.
#pragma once

namespace weft::pg {

inline constexpr int kSchemaVersion = 4;

// The advisory lock (pg_advisory_xact_lock's key) migrations hold: "weft" in ASCII.
inline constexpr long long kMigrationLock = 0x77656674;

inline constexpr char kSchemaV1[] = R"sql(
CREATE TABLE jobs (
  id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  name TEXT NOT NULL,
  state TEXT NOT NULL,
  reason TEXT NOT NULL,
  manifest TEXT NOT NULL,
  spec_json TEXT NOT NULL,
  created_ms BIGINT NOT NULL,
  updated_ms BIGINT NOT NULL,
  attempt BIGINT NOT NULL,
  node TEXT NOT NULL,
  learner_pid BIGINT NOT NULL,
  epoch BIGINT NOT NULL,
  epochs_total BIGINT NOT NULL,
  step BIGINT NOT NULL,
  steps_total BIGINT NOT NULL,
  samples BIGINT NOT NULL,
  best_test_accuracy DOUBLE PRECISION,
  deliver_met_ms BIGINT,
  complete_met_ms BIGINT,
  restarts BIGINT NOT NULL DEFAULT 0,
  learners TEXT NOT NULL DEFAULT '[]'
);
CREATE INDEX jobs_by_tenant ON jobs(tenant, created_ms);
CREATE INDEX jobs_by_state ON jobs(state, created_ms);
CREATE TABLE job_events (
  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  seq BIGINT NOT NULL,
  time_ms BIGINT NOT NULL,
  from_state TEXT,
  to_state TEXT NOT NULL,
  reason TEXT NOT NULL,
  PRIMARY KEY (job_id, seq)
);
CREATE TABLE metrics (
  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  seq BIGSERIAL PRIMARY KEY,
  step BIGINT NOT NULL,
  epoch BIGINT NOT NULL,
  wall_time_ms BIGINT NOT NULL,
  train_loss DOUBLE PRECISION NOT NULL,
  samples_per_s DOUBLE PRECISION NOT NULL,
  test_accuracy DOUBLE PRECISION,
  test_loss DOUBLE PRECISION
);
CREATE INDEX metrics_by_job ON metrics(job_id, seq);
CREATE TABLE models (
  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  path TEXT NOT NULL,
  card_path TEXT NOT NULL,
  test_accuracy DOUBLE PRECISION NOT NULL,
  epoch BIGINT NOT NULL,
  step BIGINT NOT NULL,
  bytes BIGINT NOT NULL,
  created_ms BIGINT NOT NULL,
  PRIMARY KEY (job_id, kind)
);
CREATE TABLE checkpoints (
  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  step BIGINT NOT NULL,
  epoch BIGINT NOT NULL,
  path TEXT NOT NULL,
  bytes BIGINT NOT NULL,
  created_ms BIGINT NOT NULL,
  PRIMARY KEY (job_id, step)
);
CREATE TABLE tenants (
  name TEXT PRIMARY KEY,
  has_quota BOOLEAN NOT NULL,
  quota_cpus DOUBLE PRECISION NOT NULL,
  quota_memory_mb BIGINT NOT NULL,
  quota_gpus BIGINT NOT NULL,
  weight DOUBLE PRECISION NOT NULL,
  created_ms BIGINT NOT NULL,
  disk_quota_mb BIGINT
);
CREATE TABLE tokens (
  id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  sha256 TEXT NOT NULL UNIQUE,
  created_ms BIGINT NOT NULL,
  revoked_ms BIGINT
);
CREATE TABLE artifacts (
  tenant TEXT NOT NULL,
  name TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  bytes BIGINT NOT NULL,
  created_ms BIGINT NOT NULL,
  PRIMARY KEY (tenant, name)
);
CREATE INDEX artifacts_by_digest ON artifacts(tenant, sha256);
CREATE TABLE datasets (
  name TEXT PRIMARY KEY,
  path TEXT NOT NULL,
  format TEXT NOT NULL,
  tenants TEXT NOT NULL,
  created_ms BIGINT NOT NULL
);
CREATE TABLE webhooks (
  id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  url TEXT NOT NULL,
  events TEXT NOT NULL,
  secret TEXT NOT NULL,
  created_ms BIGINT NOT NULL,
  last_status TEXT NOT NULL DEFAULT '',
  last_attempt_ms BIGINT
);
CREATE INDEX webhooks_by_tenant ON webhooks(tenant, created_ms);
CREATE TABLE webhook_deliveries (
  id BIGSERIAL PRIMARY KEY,
  webhook_id TEXT NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
  job_id TEXT NOT NULL,
  tenant TEXT NOT NULL,
  event TEXT NOT NULL,
  from_state TEXT,
  reason TEXT NOT NULL,
  time_ms BIGINT NOT NULL,
  attempts BIGINT NOT NULL DEFAULT 0,
  next_attempt_ms BIGINT NOT NULL,
  state BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries(state, next_attempt_ms);
CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries(webhook_id, state);
)sql";

// Version 2: leader election among weftd sharing the database (store/leadership.h). One lease
// row with the holder and its fencing epoch, the members' addresses, and each history entry
// stamped with the epoch of the leader that wrote it.
inline constexpr char kSchemaV2[] = R"sql(
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
)sql";

// Version 3: the membership generation of a job's current attempt and the id its next learner
// gets (job/job.h JobRecord).
inline constexpr char kSchemaV3[] = R"sql(
ALTER TABLE jobs ADD COLUMN generation BIGINT NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN next_learner_id INTEGER NOT NULL DEFAULT 0;
)sql";

// Migration i (0-based) takes a store from version i to version i + 1.
// Version 4: container images (job/job.h ImageRecord); tenant '' is the admin.
inline constexpr char kSchemaV4[] = R"sql(
CREATE TABLE images (
  tenant TEXT NOT NULL,
  name TEXT NOT NULL,
  reference TEXT NOT NULL,
  digest TEXT NOT NULL,
  format TEXT NOT NULL,
  bytes BIGINT NOT NULL,
  tenants TEXT NOT NULL,
  created_ms BIGINT NOT NULL,
  PRIMARY KEY (tenant, name)
);
)sql";

inline constexpr const char* kMigrations[] = {kSchemaV1, kSchemaV2, kSchemaV3, kSchemaV4};
static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == kSchemaVersion);

}  // namespace weft::pg
