-- SQLite's 0026 makes its full-text index keep no copy of the text it indexes. Postgres already keeps none:
-- its index is the generated search_vector column of memory_entries and a GIN index over it (0002). This
-- file keeps the two dialects' version numbers in step; it changes nothing.
SELECT 1;
