-- Pruning ended workflow runs (src/workflow/retention.ts, docs/workflows.md "Retention"). A prune walks the
-- runs whose root task ended before a cutoff in completed_at order, a batch at a time. Without an index by
-- end time every prune would read every task row, the runs kept for the month included. Partial: a run's
-- root is one row of many (its clones and subtasks are not in it), and a live root (completed_at NULL) gets
-- its entry only when it ends, so a run writes one entry more than before and a live one none.
CREATE INDEX workflow_tasks_ended_runs ON workflow_tasks (completed_at)
  WHERE parent_task_id IS NULL AND completed_at IS NOT NULL;
