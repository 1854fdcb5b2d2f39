-- Memory search over conversational context (src/memory/ltm-store.ts, docs/memory.md).
--
-- A turn's words often do not say what it is about ("Yes, every Sunday!"): the question it answers is in the
-- turns before it. `context_before` holds the words of the two previous conversational turns (user or
-- assistant entries of the same session key) with weight B, `context_after` those of the two next ones with
-- weight C; `search_vector` (the entry's own words) has weight D. Search ranks the concatenation with
-- ts_rank weights, so a match in the turn itself counts most and a match in a neighbour still lifts it.

ALTER TABLE memory_entries ADD COLUMN context_before tsvector NOT NULL DEFAULT ''::tsvector;
ALTER TABLE memory_entries ADD COLUMN context_after tsvector NOT NULL DEFAULT ''::tsvector;

-- Runs before the insert, so the new row is written once with its vector; the two previous turns are
-- updated (turns are appended in MemoryID order, so each receives exactly its next two).
CREATE FUNCTION memory_entries_context() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  before_text TEXT;
BEGIN
  IF new.state = 'tombstone' OR new.kind <> 'entry' OR new.role NOT IN ('user', 'assistant') THEN
    RETURN new;
  END IF;
  SELECT string_agg(recent.content, E'\n') INTO before_text FROM (
    SELECT p.content FROM memory_entries p
    WHERE p.session_key = new.session_key AND p.memory_id < new.memory_id
      AND p.kind = 'entry' AND p.role IN ('user', 'assistant') AND p.state <> 'tombstone'
    ORDER BY p.memory_id DESC LIMIT 2
  ) recent;
  new.context_before := setweight(to_tsvector('english', coalesce(before_text, '')), 'B');
  UPDATE memory_entries SET context_after = context_after || setweight(to_tsvector('english', new.content), 'C')
  WHERE id IN (
    SELECT p.id FROM memory_entries p
    WHERE p.session_key = new.session_key AND p.memory_id < new.memory_id
      AND p.kind = 'entry' AND p.role IN ('user', 'assistant') AND p.state <> 'tombstone'
    ORDER BY p.memory_id DESC LIMIT 2
  );
  RETURN new;
END;
$$;

CREATE TRIGGER memory_entries_context BEFORE INSERT ON memory_entries
  FOR EACH ROW EXECUTE FUNCTION memory_entries_context();

-- Existing rows: the same two parts, neighbours by window functions over each key's turns.
UPDATE memory_entries e SET
  context_before = setweight(to_tsvector('english', coalesce(ranked.before, '')), 'B'),
  context_after = setweight(to_tsvector('english', coalesce(ranked.after, '')), 'C')
FROM (
  SELECT
    id,
    concat_ws(E'\n',
      lag(content, 2) OVER (PARTITION BY session_key ORDER BY memory_id),
      lag(content, 1) OVER (PARTITION BY session_key ORDER BY memory_id)) AS before,
    concat_ws(E'\n',
      lead(content, 1) OVER (PARTITION BY session_key ORDER BY memory_id),
      lead(content, 2) OVER (PARTITION BY session_key ORDER BY memory_id)) AS after
  FROM memory_entries
  WHERE kind = 'entry' AND role IN ('user', 'assistant') AND state <> 'tombstone'
) ranked
WHERE e.id = ranked.id;

CREATE INDEX memory_entries_context_search ON memory_entries
  USING GIN ((search_vector || context_before || context_after));
