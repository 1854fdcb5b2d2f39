-- Core tables: session instances, the append-only event audit log, and a namespaced key-value store.
-- Timestamps are epoch milliseconds; JSON is TEXT.

CREATE TABLE sessions (
  id TEXT PRIMARY KEY,
  session_key TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('active', 'archived')),
  title TEXT,
  summary TEXT,
  metadata TEXT NOT NULL DEFAULT '{}',
  message_count INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL,
  last_active_at INTEGER NOT NULL,
  archived_at INTEGER,
  archive_reason TEXT
);
-- At most one active instance per key; archived instances of the key are kept as history.
CREATE UNIQUE INDEX sessions_one_active_per_key ON sessions (session_key) WHERE status = 'active';
CREATE INDEX sessions_by_key ON sessions (session_key, created_at);
CREATE INDEX sessions_by_activity ON sessions (last_active_at, id);
CREATE INDEX sessions_by_agent_activity ON sessions (agent_id, last_active_at, id);

CREATE TABLE events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  type TEXT NOT NULL,
  at INTEGER NOT NULL,
  session_key TEXT,
  agent_id TEXT,
  work_item_id TEXT,
  run_id TEXT,
  data TEXT NOT NULL
);
CREATE INDEX events_by_type ON events (type, id);
CREATE INDEX events_by_session ON events (session_key, id) WHERE session_key IS NOT NULL;
CREATE INDEX events_by_agent ON events (agent_id, id) WHERE agent_id IS NOT NULL;
CREATE INDEX events_by_work_item ON events (work_item_id, id) WHERE work_item_id IS NOT NULL;
CREATE INDEX events_by_run ON events (run_id, id) WHERE run_id IS NOT NULL;

CREATE TABLE kv (
  namespace TEXT NOT NULL,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (namespace, key)
);
