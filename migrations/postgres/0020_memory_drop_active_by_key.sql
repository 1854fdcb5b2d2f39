-- Automatic recall no longer reads a session's in-context ids from the database: it leaves the context out
-- entry by entry as candidates come (src/memory/service/recall.ts). Nothing else reads this partial index
-- (both planners answer the session listings from other indexes), and every commit that adds or evicts an
-- entry wrote a page of it.
DROP INDEX memory_entries_active_by_key;
