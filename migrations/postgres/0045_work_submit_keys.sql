-- A submission's idempotency key (src/work/sql/submit.ts, docs/work.md "Idempotency keys"). A client that
-- submitted an item and missed the answer (a timeout, a restart) and submitted it again made a second item,
-- so the work ran twice: the dedup key merges only into a live item. The key names the submission: the same
-- key again answers the item made the first time, for as long as the item is kept. Items without a key do
-- not enter the index.
ALTER TABLE work_items ADD COLUMN submit_key TEXT;
CREATE UNIQUE INDEX work_items_by_submit_key ON work_items (submit_key) WHERE submit_key IS NOT NULL;
