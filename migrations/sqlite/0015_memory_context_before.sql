-- Memory search context: the two previous turns only (src/memory/ltm-store.ts, docs/memory.md).
--
-- Migration 0014 also indexed the two next turns of each entry, so every new turn rewrote the index rows of
-- the two turns before it (an FTS5 update re-tokenizes a row's three columns). On LoCoMo the "after" column
-- added under one point of recall@10 (76.4% with it, 75.6% without, bench/locomo.bench.ts) while it made
-- each insert tokenize five turns' text three times and every row hold five turns, so each search term
-- matched two thirds more rows. The question a turn answers is in the turns before it; that column stays.

DROP TRIGGER memory_entries_fts_insert;
DROP TRIGGER memory_entries_fts_delete;
DROP TRIGGER memory_entries_fts_update;
DROP TABLE memory_fts;

CREATE VIRTUAL TABLE memory_fts USING fts5 (
  content,
  before,
  tokenize = 'porter unicode61'
);

-- The lookup walks the (session_key, memory_id) unique index backwards from the new row.
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
  UPDATE memory_fts SET content = new.content WHERE rowid = new.id;
END;

-- Existing rows: the two previous turns of each key's turns by window functions.
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
