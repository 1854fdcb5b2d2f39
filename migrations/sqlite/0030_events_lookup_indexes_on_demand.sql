-- The audit log's indexes by session key, work item and run are made by the first `EventStore.list` that
-- filters on that column (docs/storage.md, events). Nothing in agentd lists the audit log; every chat turn
-- writes two rows of it, and these three indexes, keyed all over their B-trees, made each row cost about
-- eight times what the row and the indexes by type and agent cost (24 against 2.9 µs in batches of 260 on
-- SQLite). The indexes by type and agent, appended at their ends, stay.
DROP INDEX IF EXISTS events_by_session;
DROP INDEX IF EXISTS events_by_work_item;
DROP INDEX IF EXISTS events_by_run;
