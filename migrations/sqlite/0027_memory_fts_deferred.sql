-- Memory's full-text index is written in batches, no longer by a trigger in every commit that writes an
-- entry (src/memory/ltm-store.ts, docs/storage.md).
--
-- FTS5 turns each transaction's new rows into a segment of its own when the transaction commits: a chat
-- turn's two commits each wrote a one-row segment and merged segments now and then, about two fifths of
-- SQLite's work in a turn. memory_fts_indexed holds the highest entry row id the index has seen; the rows
-- past it are indexed together (and the mark moved) by the store before any search reads the index, and in
-- the background shortly after they were written. A row past the mark is not in the index yet: updating or
-- deleting it leaves the index alone, and it is indexed as it is when its turn comes.

DROP TRIGGER memory_entries_fts_insert;
DROP TRIGGER memory_entries_fts_delete;
DROP TRIGGER memory_entries_fts_update;

CREATE TABLE memory_fts_indexed (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  up_to INTEGER NOT NULL
);
-- Every row written so far was indexed by the trigger.
INSERT INTO memory_fts_indexed (id, up_to) SELECT 1, coalesce(max(id), 0) FROM memory_entries;

CREATE TRIGGER memory_entries_fts_delete AFTER DELETE ON memory_entries
WHEN old.state <> 'tombstone' AND old.id <= (SELECT up_to FROM memory_fts_indexed WHERE id = 1) BEGIN
  DELETE FROM memory_fts WHERE rowid = old.id;
END;

CREATE TRIGGER memory_entries_fts_update AFTER UPDATE OF content ON memory_entries
WHEN old.state <> 'tombstone' AND new.id <= (SELECT up_to FROM memory_fts_indexed WHERE id = 1) BEGIN
  DELETE FROM memory_fts WHERE rowid = new.id;
  INSERT INTO memory_fts (rowid, content, before) VALUES (
    new.id,
    new.content,
    CASE WHEN new.kind = 'entry' AND new.role IN ('user', 'assistant') THEN coalesce((
      SELECT group_concat(content, char(10)) FROM (
        SELECT p.content FROM memory_entries p
        WHERE p.session_key = new.session_key AND p.memory_id < new.memory_id
          AND p.kind = 'entry' AND p.role IN ('user', 'assistant') AND p.state <> 'tombstone'
        ORDER BY p.memory_id DESC LIMIT 2)), '') ELSE '' END
  );
END;
