-- A run's end records (src/workflow/record-store.ts `saveRunRecords`, record version 3): the events and
-- artifacts its stage rows do not stand for, written once when it finished, as one document on its root
-- task's row. Before, each was a row of `workflow_events` or `workflow_artifacts`, so every durable run's
-- commit also wrote those tables' B-trees: of a 3-node chain's 17.4 WAL pages, 7.2 were theirs (the events'
-- key, the artifacts' rows, their id key and their by-run index), for four events and one artifact. The root
-- task's row is written in that same commit anyway. Runs written before keep their rows in the two tables,
-- which are read as before and pruned with their runs.
ALTER TABLE workflow_tasks ADD COLUMN run_records TEXT;
