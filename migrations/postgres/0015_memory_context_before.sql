-- Memory search context: the two previous turns only (src/memory/ltm-store.ts, docs/memory.md).
--
-- Migration 0014 also indexed the two next turns of each entry, so every new turn updated the rows of the
-- two turns before it (two more row versions and GIN entries per insert). On LoCoMo the "after" part added
-- under one point of recall@10 (76.4% with it, 75.6% without, bench/locomo.bench.ts) while it made each
-- row hold five turns, so each search term matched two thirds more rows. The question a turn answers is in
-- the turns before it; that part stays.

DROP INDEX memory_entries_context_search;
ALTER TABLE memory_entries DROP COLUMN context_after;

CREATE OR REPLACE FUNCTION memory_entries_context() RETURNS trigger LANGUAGE plpgsql AS $$
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
  RETURN new;
END;
$$;

CREATE INDEX memory_entries_context_search ON memory_entries USING GIN ((search_vector || context_before));
