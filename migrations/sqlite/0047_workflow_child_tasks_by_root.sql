-- A run's tasks by run, for its clones and subtasks only (src/workflow/record-store.ts `loadRun`,
-- src/workflow/prune-runs.ts). A root task's run is the root itself: its row is found by its id, through the
-- table's key, so an entry for it in this index said nothing the key does not. Every durable run writes its
-- root's row, and most runs (a chain, a router) have no other task: that entry was a page of every such run's
-- commit, 1.2 of a 3-node chain's 7.6 WAL pages, and a page more for each checkpoint to copy.
DROP INDEX workflow_tasks_by_root;
CREATE INDEX workflow_child_tasks_by_root ON workflow_tasks (root_task_id, created_at)
  WHERE parent_task_id IS NOT NULL;
