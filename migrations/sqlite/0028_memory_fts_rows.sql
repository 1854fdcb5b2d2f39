-- What the full-text index holds for an entry, defined once: its own words, and for a conversational turn
-- the two turns before it (migration 0015). The batches that index new entries (src/memory/ltm-store.ts)
-- and the trigger that re-indexes a changed entry both read it, so the two cannot drift apart.

CREATE VIEW memory_fts_rows AS
SELECT
  n.id,
  n.state,
  n.content,
  CASE WHEN n.kind = 'entry' AND n.role IN ('user', 'assistant') THEN coalesce((
    SELECT group_concat(content, char(10)) FROM (
      SELECT p.content FROM memory_entries p
      WHERE p.session_key = n.session_key AND p.memory_id < n.memory_id
        AND p.kind = 'entry' AND p.role IN ('user', 'assistant') AND p.state <> 'tombstone'
      ORDER BY p.memory_id DESC LIMIT 2)), '') ELSE '' END AS before
FROM memory_entries n;

DROP TRIGGER memory_entries_fts_update;
CREATE TRIGGER memory_entries_fts_update AFTER UPDATE OF content ON memory_entries
WHEN old.state <> 'tombstone' AND new.id <= (SELECT up_to FROM memory_fts_indexed WHERE id = 1) BEGIN
  DELETE FROM memory_fts WHERE rowid = new.id;
  INSERT INTO memory_fts (rowid, content, before) SELECT id, content, before FROM memory_fts_rows WHERE id = new.id;
END;
