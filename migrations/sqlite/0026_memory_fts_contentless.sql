-- Memory's full-text index keeps no copy of the text it indexes (src/memory/ltm-store.ts, docs/storage.md).
--
-- Since 0015 the index was an FTS5 table with its own content table: every entry's text, and the text of the
-- two turns before it, stored a second time beside memory_entries, one more B-tree page in every commit that
-- writes an entry (two a chat turn). Searches read only rowids, MATCH and bm25, which need the index and the
-- per-row sizes, never the stored text. A contentless table with deletes (SQLite 3.43+) keeps exactly that.
-- It takes an UPDATE only of every column, so the update trigger deletes the row and indexes it again, with
-- the same two previous turns the insert trigger gives it.

DROP TRIGGER memory_entries_fts_insert;
DROP TRIGGER memory_entries_fts_delete;
DROP TRIGGER memory_entries_fts_update;
DROP TABLE memory_fts;

CREATE VIRTUAL TABLE memory_fts USING fts5 (
  content,
  before,
  content = '',
  contentless_delete = 1,
  tokenize = 'porter unicode61'
);

CREATE TRIGGER memory_entries_fts_insert AFTER INSERT ON memory_entries WHEN new.state <> 'tombstone' BEGIN
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

CREATE TRIGGER memory_entries_fts_delete AFTER DELETE ON memory_entries WHEN old.state <> 'tombstone' BEGIN
  DELETE FROM memory_fts WHERE rowid = old.id;
END;

CREATE TRIGGER memory_entries_fts_update AFTER UPDATE OF content ON memory_entries WHEN old.state <> 'tombstone' BEGIN
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

-- Existing rows: the two previous turns of each key's turns by window functions, as 0015 indexed them.
INSERT INTO memory_fts (rowid, content, before)
SELECT id, content, coalesce(before, '') FROM (
  SELECT
    id,
    content,
    CASE WHEN turn = 1 THEN nullif(concat_ws(char(10),
      lag(content, 2) OVER (PARTITION BY session_key, turn ORDER BY memory_id),
      lag(content, 1) OVER (PARTITION BY session_key, turn ORDER BY memory_id)), '') END AS before
  FROM (
    SELECT id, session_key, memory_id, content,
      CASE WHEN kind = 'entry' AND role IN ('user', 'assistant') THEN 1 ELSE 0 END AS turn
    FROM memory_entries WHERE state <> 'tombstone'
  ) searchable
) ranked;
