-- Fewer indexes per chat-turn commit (docs/storage.md), as on SQLite.
--
-- memory_events is read newest first per session key and deleted per key or by age; nothing looks an event
-- up by id alone. Keyed by (session_key, created_at_ms, id), its primary key serves the per-key reads and
-- deletes, so the separate per-key index goes and each eviction's event updates two indexes, not three.
-- kv needs nothing here: a Postgres table is a heap with its primary key's index either way.

ALTER TABLE memory_events DROP CONSTRAINT memory_events_pkey;
ALTER TABLE memory_events ADD PRIMARY KEY (session_key, created_at_ms, id);
DROP INDEX memory_events_by_key;
