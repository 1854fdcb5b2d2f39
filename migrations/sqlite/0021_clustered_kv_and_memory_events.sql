-- Fewer B-trees per chat-turn commit (docs/storage.md).
--
-- Every chat turn commits twice, and each commit writes a kv row (the run's inbox record) and, once a
-- session is at its limits, a memory_events row (the eviction it causes). As rowid tables with a text key,
-- each write touched the table and its key's automatic index, and memory_events also its per-key index:
-- five of the twenty-odd B-trees a commit writes, each one WAL frame or more. Keyed WITHOUT ROWID, kv is one
-- B-tree; memory_events is stored in the order its only reader (newest first per session key) and its
-- per-key delete want, so its key index goes too. Nothing looks a memory event up by id alone.

CREATE TABLE kv_keyed (
  namespace TEXT NOT NULL,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (namespace, key)
) WITHOUT ROWID;
INSERT INTO kv_keyed (namespace, key, value, updated_at) SELECT namespace, key, value, updated_at FROM kv;
DROP TABLE kv;
ALTER TABLE kv_keyed RENAME TO kv;

CREATE TABLE memory_events_keyed (
  id TEXT NOT NULL,
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
  created_at_ms INTEGER NOT NULL,
  PRIMARY KEY (session_key, created_at_ms, id)
) WITHOUT ROWID;
INSERT INTO memory_events_keyed (
  id, session_id, session_key, agent_id, kind, count, tokens_before, tokens_after, memory_ids, message, details,
  created_at_ms
)
SELECT
  id, session_id, session_key, agent_id, kind, count, tokens_before, tokens_after, memory_ids, message, details,
  created_at_ms
FROM memory_events;
DROP TABLE memory_events;
ALTER TABLE memory_events_keyed RENAME TO memory_events;
CREATE INDEX memory_events_by_time ON memory_events (created_at_ms);
