-- Postgres's 0041 widens workflow_memory.created_at to 64 bits. SQLite's INTEGER already holds 64 bits; this
-- file keeps the two dialects' version numbers in step and changes nothing.
SELECT 1;
