-- SQLite only: its full-text index now follows the entries (src/memory/fts-backlog.ts). Postgres keeps each
-- entry's search vector in its row, written with it. The number is kept in step with the SQLite migrations.
SELECT 1;
