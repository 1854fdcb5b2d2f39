-- Records a durable run writes once onto its task rows (src/workflow/record-store.ts, record version 3), in
-- the commit that writes those rows anyway, instead of rows of their own in other tables:
-- - `run_records`, on a run's root task: its end records (`saveRunRecords`), the events and artifacts its stage
--   rows do not stand for, written once when it finished. Each was a row of `workflow_events` or
--   `workflow_artifacts` before, so every run's commit also wrote those tables' B-trees: of a 3-node chain's
--   17.4 WAL pages, 7.2 were theirs (the events' key, the artifacts' rows, their id key and their by-run
--   index), for four events and one artifact.
-- - `stage_records`, on any task: the stage records written in the commit that concludes it, as a list. A
--   task's earlier stages keep their rows in `workflow_stages`, written as each ended; a run whose stages all
--   end in one event-loop turn writes none, which was 3.6 of the chain's remaining 11.2 pages.
-- Runs written before keep their rows in the three tables, which are read as before and pruned with their runs.
ALTER TABLE workflow_tasks ADD COLUMN run_records TEXT;
ALTER TABLE workflow_tasks ADD COLUMN stage_records TEXT;
