-- A session instance's entries are found through the key's unique (session_key, memory_id) index, from ids
-- the instance's row keeps (src/memory/ltm-store.ts, docs/memory.md), no longer through an index of their own.
--
-- memory_entries_by_session (session_id, state, order_key) was written by every entry's insert and every
-- eviction's change of state, and read only when a session is loaded into RAM, archived or deleted. In a chat
-- turn at 100 clients on SQLite its leaves were about 2 of the 5.6 pages each turn wrote to the WAL, and the
-- largest B-tree of the engage loop's durable transcript commit. MemoryIDs grow per key and are never reused,
-- so an instance's entries are the key's ids from the first one it wrote, and its active entries are at or
-- above the lowest active one:
-- - first_memory_id: a lower bound of every id the instance wrote (NULL: it wrote none yet);
-- - live_from_id: a lower bound of the ids of its active entries, moved up as they are evicted or summarized
--   (written with last_active_ms, at most once a second; NULL: no entries yet, use first_memory_id).
ALTER TABLE memory_sessions ADD COLUMN first_memory_id INTEGER;
ALTER TABLE memory_sessions ADD COLUMN live_from_id INTEGER;
UPDATE memory_sessions SET
  first_memory_id = (SELECT min(e.memory_id) FROM memory_entries e WHERE e.session_id = memory_sessions.session_id),
  live_from_id = coalesce(
    (
      SELECT min(e.memory_id) FROM memory_entries e
      WHERE e.session_id = memory_sessions.session_id AND e.state = 'active' AND e.archived_at_ms IS NULL
    ),
    (SELECT max(e.memory_id) + 1 FROM memory_entries e WHERE e.session_id = memory_sessions.session_id)
  );
DROP INDEX memory_entries_by_session;
