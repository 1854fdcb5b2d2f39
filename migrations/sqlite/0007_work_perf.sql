-- Work queue performance (src/work/queue.ts). Postgres gets a claim function with a pinned plan in its
-- 0007; SQLite needs no schema change for the same effect (its claim names `work_items_ready` with
-- INDEXED BY), so this migration only keeps the version numbers of both dialects aligned.
SELECT 1;
