-- Memory: RAM write-through and long-term memory (src/memory, docs/memory.md).

-- One row per session instance the memory service has seen (a reset starts a new instance under the same key).
CREATE TABLE memory_sessions (
  session_id TEXT PRIMARY KEY,
  session_key TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  created_at_ms INTEGER NOT NULL,
  last_active_ms INTEGER NOT NULL,
  archived_at_ms INTEGER,
  archive_reason TEXT
);
CREATE INDEX memory_sessions_by_key ON memory_sessions (session_key, created_at_ms);
CREATE INDEX memory_sessions_by_agent ON memory_sessions (agent_id);

-- MemoryID counter per session key. Never deleted, so ids are never reused for a key.
CREATE TABLE memory_counters (
  session_key TEXT PRIMARY KEY,
  next_id INTEGER NOT NULL
);

CREATE TABLE memory_entries (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  session_key TEXT NOT NULL,
  memory_id INTEGER NOT NULL,
  session_id TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  kind TEXT NOT NULL,
  role TEXT NOT NULL,
  state TEXT NOT NULL,
  related_to INTEGER,
  -- Position in the context: a summary takes the place of the oldest entry it folds.
  order_key INTEGER NOT NULL,
  content TEXT NOT NULL,
  tool_data TEXT,
  metadata TEXT,
  tokens INTEGER NOT NULL,
  created_at_ms INTEGER NOT NULL,
  updated_at_ms INTEGER NOT NULL,
  archived_at_ms INTEGER,
  UNIQUE (session_key, memory_id)
);
CREATE INDEX memory_entries_by_session ON memory_entries (session_id, state, order_key);
CREATE INDEX memory_entries_by_agent ON memory_entries (agent_id, created_at_ms);
CREATE INDEX memory_entries_by_agent_kind ON memory_entries (agent_id, kind, created_at_ms);

-- Full-text index over entry content (tombstones are not indexed). Content is immutable once written.
CREATE VIRTUAL TABLE memory_fts USING fts5 (
  content,
  content = 'memory_entries',
  content_rowid = 'id',
  tokenize = 'porter unicode61'
);
CREATE TRIGGER memory_entries_fts_insert AFTER INSERT ON memory_entries WHEN new.state <> 'tombstone' BEGIN
  INSERT INTO memory_fts (rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER memory_entries_fts_delete AFTER DELETE ON memory_entries WHEN old.state <> 'tombstone' BEGIN
  INSERT INTO memory_fts (memory_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;
CREATE TRIGGER memory_entries_fts_update AFTER UPDATE OF content ON memory_entries WHEN old.state <> 'tombstone' BEGIN
  INSERT INTO memory_fts (memory_fts, rowid, content) VALUES ('delete', old.id, old.content);
  INSERT INTO memory_fts (rowid, content) VALUES (new.id, new.content);
END;

-- Embeddings (float32 little-endian BLOB, L2-normalized) when an embedding provider is configured.
CREATE TABLE memory_vectors (
  entry_id INTEGER NOT NULL REFERENCES memory_entries (id) ON DELETE CASCADE,
  agent_id TEXT NOT NULL,
  model TEXT NOT NULL,
  dimensions INTEGER NOT NULL,
  vector BLOB NOT NULL,
  PRIMARY KEY (entry_id, model)
);
CREATE INDEX memory_vectors_by_agent ON memory_vectors (agent_id, model);

CREATE TABLE memory_snapshots (
  id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL,
  session_key TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  reason TEXT NOT NULL,
  next_id INTEGER NOT NULL,
  entry_count INTEGER NOT NULL,
  summary_count INTEGER NOT NULL,
  tombstone_count INTEGER NOT NULL,
  active_tokens INTEGER NOT NULL,
  active_ids TEXT NOT NULL,
  created_at_ms INTEGER NOT NULL
);
CREATE INDEX memory_snapshots_by_key ON memory_snapshots (session_key, created_at_ms);

CREATE TABLE memory_events (
  id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL,
  session_key TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  kind TEXT NOT NULL,
  count INTEGER NOT NULL,
  tokens_before INTEGER NOT NULL,
  tokens_after INTEGER NOT NULL,
  memory_ids TEXT NOT NULL,
  message TEXT NOT NULL,
  details TEXT,
  created_at_ms INTEGER NOT NULL
);
CREATE INDEX memory_events_by_key ON memory_events (session_key, created_at_ms);
CREATE INDEX memory_events_by_time ON memory_events (created_at_ms);
