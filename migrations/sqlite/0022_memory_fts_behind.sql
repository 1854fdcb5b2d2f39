-- The full-text index is written behind the entries (src/memory/fts-backlog.ts, docs/memory.md).
--
-- The insert trigger indexed every entry inside the commit that stored it: the index's content, size and
-- term B-trees and a new FTS5 segment, about 12 of a chat turn's 35 WAL pages for its two entries. Now an
-- entry's commit writes the entry alone, and entries with a row id above `indexed_up_to` are indexed
-- together, in one transaction, soon after and before any full-text read. The delete and update triggers
-- stay: on an entry not indexed yet they change nothing, and the backlog indexes what the entry then holds.

DROP TRIGGER memory_entries_fts_insert;

CREATE TABLE memory_fts_progress (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  indexed_up_to INTEGER NOT NULL
);

-- Every entry written so far went through the insert trigger.
INSERT INTO memory_fts_progress (id, indexed_up_to) SELECT 1, coalesce(max(id), 0) FROM memory_entries;
