-- Memory search over conversational context (src/memory/ltm-store.ts, docs/memory.md).
--
-- A turn's words often do not say what it is about ("Yes, every Sunday!"): the question it answers is in the
-- turns before it. The full-text index therefore holds three columns per entry: its own content, the content
-- of the two previous conversational turns (user or assistant entries of the same session key) and that of
-- the two next ones. Search ranks with bm25 column weights, so a match in the turn itself counts most and a
-- match in a neighbour still lifts it. The index keeps its own copy of the text (it is not an
-- external-content table) because the neighbour columns come from other rows.

DROP TRIGGER memory_entries_fts_insert;
DROP TRIGGER memory_entries_fts_delete;
DROP TRIGGER memory_entries_fts_update;
DROP TABLE memory_fts;

CREATE VIRTUAL TABLE memory_fts USING fts5 (
  content,
  before,
  after,
  tokenize = 'porter unicode61'
);

-- The neighbour lookups walk the (session_key, memory_id) unique index backwards from the new row.
CREATE TRIGGER memory_entries_fts_insert AFTER INSERT ON memory_entries WHEN new.state <> 'tombstone' BEGIN
  INSERT INTO memory_fts (rowid, content, before, after) VALUES (
    new.id,
    new.content,
    CASE WHEN new.kind = 'entry' AND new.role IN ('user', 'assistant') THEN coalesce((
      SELECT group_concat(content, char(10)) FROM (
        SELECT p.content FROM memory_entries p
        WHERE p.session_key = new.session_key AND p.memory_id < new.memory_id
          AND p.kind = 'entry' AND p.role IN ('user', 'assistant') AND p.state <> 'tombstone'
        ORDER BY p.memory_id DESC LIMIT 2)), '') ELSE '' END,
    ''
  );
  -- The two previous turns learn their successor; turns are appended in MemoryID order, so each receives
  -- exactly its next two.
  UPDATE memory_fts SET after = CASE WHEN after = '' THEN new.content ELSE after || char(10) || new.content END
  WHERE new.kind = 'entry' AND new.role IN ('user', 'assistant') AND rowid IN (
    SELECT p.id FROM memory_entries p
    WHERE p.session_key = new.session_key AND p.memory_id < new.memory_id
      AND p.kind = 'entry' AND p.role IN ('user', 'assistant') AND p.state <> 'tombstone'
    ORDER BY p.memory_id DESC LIMIT 2);
END;

CREATE TRIGGER memory_entries_fts_delete AFTER DELETE ON memory_entries WHEN old.state <> 'tombstone' BEGIN
  DELETE FROM memory_fts WHERE rowid = old.id;
END;

CREATE TRIGGER memory_entries_fts_update AFTER UPDATE OF content ON memory_entries WHEN old.state <> 'tombstone' BEGIN
  UPDATE memory_fts SET content = new.content WHERE rowid = new.id;
END;

-- Existing rows: the same three columns, neighbours by window functions over each key's turns.
INSERT INTO memory_fts (rowid, content, before, after)
SELECT id, content, coalesce(before, ''), coalesce(after, '') FROM (
  SELECT
    id,
    content,
    CASE WHEN turn = 1 THEN nullif(concat_ws(char(10),
      lag(content, 2) OVER (PARTITION BY session_key, turn ORDER BY memory_id),
      lag(content, 1) OVER (PARTITION BY session_key, turn ORDER BY memory_id)), '') END AS before,
    CASE WHEN turn = 1 THEN nullif(concat_ws(char(10),
      lead(content, 1) OVER (PARTITION BY session_key, turn ORDER BY memory_id),
      lead(content, 2) OVER (PARTITION BY session_key, turn ORDER BY memory_id)), '') END AS after
  FROM (
    SELECT id, session_key, memory_id, content,
      CASE WHEN kind = 'entry' AND role IN ('user', 'assistant') THEN 1 ELSE 0 END AS turn
    FROM memory_entries WHERE state <> 'tombstone'
  ) searchable
) ranked;
