-- Memory entries are no longer indexed by agent and time (docs/decisions/0035-no-memory-index-by-agent.md).
--
-- Every commit of new entries wrote this B-tree (on SQLite about 2.4 of a chat turn's 14 WAL pages) for one
-- kind of read: a list of an agent's entries across its sessions without a session key, which only the
-- library's memory.recall and memory.query make (the gateway's always name a session). That list now reads
-- the table newest written first, by row id; summaries keep their partial index (migration 0024).
DROP INDEX memory_entries_by_agent;
