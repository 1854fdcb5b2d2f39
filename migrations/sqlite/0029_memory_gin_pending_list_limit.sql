-- Postgres's 0029 bounds the pending list of its two GIN indexes of memory entries. SQLite's full-text index
-- has no such list; this file keeps the two dialects' version numbers in step and changes nothing.
SELECT 1;
