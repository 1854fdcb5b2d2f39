-- Memory: RAM write-through and long-term memory (src/memory, docs/memory.md).

CREATE TABLE memory_sessions (
  session_id TEXT PRIMARY KEY,
  session_key TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  created_at_ms BIGINT NOT NULL,
  last_active_ms BIGINT NOT NULL,
  archived_at_ms BIGINT,
  archive_reason TEXT
);
CREATE INDEX memory_sessions_by_key ON memory_sessions (session_key, created_at_ms);
CREATE INDEX memory_sessions_by_agent ON memory_sessions (agent_id);

-- MemoryID counter per session key. Never deleted, so ids are never reused for a key.
CREATE TABLE memory_counters (
  session_key TEXT PRIMARY KEY,
  next_id BIGINT NOT NULL
);

CREATE TABLE memory_entries (
  id BIGSERIAL PRIMARY KEY,
  session_key TEXT NOT NULL,
  memory_id BIGINT NOT NULL,
  session_id TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  kind TEXT NOT NULL,
  role TEXT NOT NULL,
  state TEXT NOT NULL,
  related_to BIGINT,
  order_key BIGINT NOT NULL,
  content TEXT NOT NULL,
  tool_data TEXT,
  metadata TEXT,
  tokens INTEGER NOT NULL,
  created_at_ms BIGINT NOT NULL,
  updated_at_ms BIGINT NOT NULL,
  archived_at_ms BIGINT,
  -- Tombstones are not searchable.
  search_vector tsvector GENERATED ALWAYS AS (
    to_tsvector('english', CASE WHEN state = 'tombstone' THEN '' ELSE content END)
  ) STORED,
  UNIQUE (session_key, memory_id)
);
CREATE INDEX memory_entries_by_session ON memory_entries (session_id, state, order_key);
CREATE INDEX memory_entries_by_agent ON memory_entries (agent_id, created_at_ms);
CREATE INDEX memory_entries_by_agent_kind ON memory_entries (agent_id, kind, created_at_ms);
CREATE INDEX memory_entries_search ON memory_entries USING GIN (search_vector);

-- Embeddings as float arrays (pgvector is not assumed); cosine is computed in SQL over normalized vectors.
CREATE TABLE memory_vectors (
  entry_id BIGINT NOT NULL REFERENCES memory_entries (id) ON DELETE CASCADE,
  agent_id TEXT NOT NULL,
  model TEXT NOT NULL,
  dimensions INTEGER NOT NULL,
  vector REAL[] NOT NULL,
  PRIMARY KEY (entry_id, model)
);
CREATE INDEX memory_vectors_by_agent ON memory_vectors (agent_id, model);

CREATE TABLE memory_snapshots (
  id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL,
  session_key TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  reason TEXT NOT NULL,
  next_id BIGINT NOT NULL,
  entry_count INTEGER NOT NULL,
  summary_count INTEGER NOT NULL,
  tombstone_count INTEGER NOT NULL,
  active_tokens INTEGER NOT NULL,
  active_ids TEXT NOT NULL,
  created_at_ms BIGINT NOT NULL
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
  created_at_ms BIGINT NOT NULL
);
CREATE INDEX memory_events_by_key ON memory_events (session_key, created_at_ms);
CREATE INDEX memory_events_by_time ON memory_events (created_at_ms);
