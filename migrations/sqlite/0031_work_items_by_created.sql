-- The work queue's list, newest (or oldest) first: the dashboard's Work view asks for it every 2 s. Without
-- this index each call read and sorted every work item (55 ms at 100,000 items on SQLite, on the event loop);
-- with it the newest items are read in order and the scan stops at the limit (1.2 ms). created_at never
-- changes, so a state transition does not touch the index, and new items append at its end.
CREATE INDEX work_items_by_created ON work_items (created_at, id);
