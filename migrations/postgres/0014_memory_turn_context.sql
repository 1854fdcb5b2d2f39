-- Memory search over conversational context (src/memory/ltm-store.ts, docs/memory.md).
--
-- A turn's words often do not say what it is about ("Yes, every Sunday!"): the question it answers is in the
-- turn before it. `context_vector` holds an entry's own words with weight A, the previous conversational
-- turn's (user or assistant entry of the same session key) with weight B and the next one's with weight C;
-- search ranks it with ts_rank weights, so a match in the turn itself counts most and a match in a neighbour
-- still lifts it. `search_vector` stays for phrase lookups (memory.query by topic).

ALTER TABLE memory_entries ADD COLUMN context_vector tsvector;

CREATE FUNCTION memory_turn_vector(own TEXT, before TEXT, after TEXT) RETURNS tsvector
LANGUAGE sql IMMUTABLE AS $$
  SELECT setweight(to_tsvector('english', coalesce(own, '')), 'A')
    || setweight(to_tsvector('english', coalesce(before, '')), 'B')
    || setweight(to_tsvector('english', coalesce(after, '')), 'C')
$$;

-- Runs before the insert, so the new row is written once with its vector; only the previous turn is updated.
CREATE FUNCTION memory_entries_context() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  previous RECORD;
  before_previous TEXT;
BEGIN
  IF new.state = 'tombstone' THEN
    RETURN new;
  END IF;
  IF new.kind <> 'entry' OR new.role NOT IN ('user', 'assistant') THEN
    new.context_vector := memory_turn_vector(new.content, NULL, NULL);
    RETURN new;
  END IF;
  SELECT p.id, p.memory_id, p.content INTO previous FROM memory_entries p
  WHERE p.session_key = new.session_key AND p.memory_id < new.memory_id
    AND p.kind = 'entry' AND p.role IN ('user', 'assistant') AND p.state <> 'tombstone'
  ORDER BY p.memory_id DESC LIMIT 1;
  new.context_vector := memory_turn_vector(new.content, previous.content, NULL);
  IF previous.id IS NOT NULL THEN
    -- The previous turn learns its successor; turns are appended in MemoryID order, so it had none yet.
    SELECT b.content INTO before_previous FROM memory_entries b
    WHERE b.session_key = new.session_key AND b.memory_id < previous.memory_id
      AND b.kind = 'entry' AND b.role IN ('user', 'assistant') AND b.state <> 'tombstone'
    ORDER BY b.memory_id DESC LIMIT 1;
    UPDATE memory_entries SET context_vector = memory_turn_vector(previous.content, before_previous, new.content)
    WHERE id = previous.id;
  END IF;
  RETURN new;
END;
$$;

CREATE TRIGGER memory_entries_context BEFORE INSERT ON memory_entries
  FOR EACH ROW EXECUTE FUNCTION memory_entries_context();

-- Existing rows: the same three parts, neighbours by window functions over each key's turns.
UPDATE memory_entries e SET context_vector = memory_turn_vector(e.content, ranked.before, ranked.after)
FROM (
  SELECT
    id,
    CASE WHEN turn THEN lag(content) OVER (PARTITION BY session_key, turn ORDER BY memory_id) END AS before,
    CASE WHEN turn THEN lead(content) OVER (PARTITION BY session_key, turn ORDER BY memory_id) END AS after
  FROM (
    SELECT id, session_key, memory_id, content, (kind = 'entry' AND role IN ('user', 'assistant')) AS turn
    FROM memory_entries WHERE state <> 'tombstone'
  ) searchable
) ranked
WHERE e.id = ranked.id;

CREATE INDEX memory_entries_context_search ON memory_entries USING GIN (context_vector);
