-- The by-kind index of memory entries holds summaries only (src/memory/ltm-store.ts, docs/memory.md).
--
-- Nearly every entry is of kind 'entry', and a read of entries by agent and time walks
-- memory_entries_by_agent, skipping the few summaries; only a read of summaries needs an index of its own.
-- Indexing every entry by kind as well cost each commit of new entries one more B-tree: about 2.5 of a chat
-- turn's WAL pages on SQLite (of about 30). A read by a kind other than 'entry' says so literally (`kind <> 'entry'`),
-- which is how both planners know this partial index answers it.
DROP INDEX memory_entries_by_agent_kind;
CREATE INDEX memory_entries_by_agent_kind ON memory_entries (agent_id, kind, created_at_ms) WHERE kind <> 'entry';
