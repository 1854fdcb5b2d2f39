-- Runs a crash interrupted (src/workflow/run-owners.ts, docs/workflows.md "Interrupted runs"). A run's code
-- lives in the process that started it, so a run whose process died never writes its end: its tasks stayed
-- in progress for ever, shown so by inspect and never pruned. Every process writing runs now holds an
-- owner row it renews while it has runs, and stamps its task rows with it; a task still open whose owner's
-- lease lapsed (or, from before this migration, that has none) is concluded failed INTERRUPTED by a sweep.
CREATE TABLE workflow_run_owners (
  owner_id TEXT PRIMARY KEY,
  alive_until INTEGER NOT NULL
);
ALTER TABLE workflow_tasks ADD COLUMN owner_id TEXT;
-- The sweep reads the open tasks alone: a run's task rows get an entry while they are open (a run whose
-- stages all finish in one event-loop turn writes its tasks once, ended, and so never has one).
CREATE INDEX workflow_tasks_open ON workflow_tasks (task_id) WHERE completed_at IS NULL;
