-- Durable work items (src/work). Timestamps are epoch milliseconds; JSON columns are TEXT.
CREATE TABLE work_items (
  id TEXT PRIMARY KEY,
  kind TEXT NOT NULL,
  agent_id TEXT,
  title TEXT NOT NULL,
  description TEXT NOT NULL DEFAULT '',
  params TEXT NOT NULL DEFAULT '{}',
  priority INTEGER NOT NULL DEFAULT 0,
  state TEXT NOT NULL,
  dedup_key TEXT,
  merged_into TEXT,
  parent_id TEXT REFERENCES work_items(id),
  depth INTEGER NOT NULL DEFAULT 0,
  attempts INTEGER NOT NULL DEFAULT 0,
  max_attempts INTEGER NOT NULL DEFAULT 3,
  lease_owner TEXT,
  lease_expires_at INTEGER,
  run_after INTEGER NOT NULL,
  speculative INTEGER NOT NULL DEFAULT 0,
  rationale TEXT,
  waiting_on TEXT,
  state_reason TEXT,
  outcome TEXT,
  session_key TEXT,
  source TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  started_at INTEGER,
  resolved_at INTEGER
);

-- Structural dedup: at most one live item per (kind, dedup_key).
CREATE UNIQUE INDEX work_items_live_dedup ON work_items (kind, dedup_key)
  WHERE dedup_key IS NOT NULL AND state NOT IN ('completed', 'failed', 'dead', 'cancelled', 'merged');
CREATE INDEX work_items_ready ON work_items (priority DESC, created_at, id) WHERE state = 'queued';
CREATE INDEX work_items_leased ON work_items (lease_expires_at) WHERE state IN ('claimed', 'running');
CREATE INDEX work_items_parent ON work_items (parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX work_items_state_updated ON work_items (state, updated_at);
CREATE INDEX work_items_session ON work_items (session_key, state) WHERE session_key IS NOT NULL;
CREATE INDEX work_items_resolved ON work_items (resolved_at) WHERE resolved_at IS NOT NULL;
