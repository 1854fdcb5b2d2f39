-- The two GIN indexes of memory_entries (0002, 0015) keep a pending list of new entries of at most 128 kB
-- instead of the server's default `gin_pending_list_limit` (4 MB). An insert appends its entries to that list,
-- every search reads all of it, and the insert that fills it merges it into the index. While the list is
-- long the planner prices the index above a sequential scan, so on a table written at chat speed a search
-- of a term with few matches read every row: counting such a term took 50–170 ms instead of 0.2 ms. Without a
-- list at all (`fastupdate = off`) each insert updates the index itself, and writing 100,000 entries took
-- three times as long; with 128 kB a third longer. See docs/memory.md, Search.
ALTER INDEX memory_entries_search SET (gin_pending_list_limit = 128);
ALTER INDEX memory_entries_context_search SET (gin_pending_list_limit = 128);
