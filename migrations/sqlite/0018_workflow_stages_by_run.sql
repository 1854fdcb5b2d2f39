-- Workflow stage rows stored in their run's order, in one B-tree: `loadRun` reads a run's stages by root
-- task, task and index, and nothing reads them by task alone. The table of 0006 kept each row three times
-- over (the rowid table, its (task_id, stage_index) key and the (root_task_id, completed_at) index); a
-- WITHOUT ROWID table keyed (root_task_id, task_id, stage_index) keeps it once, and since a stage is one
-- row (record version 2, src/workflow/records.ts) that is most of what a durable stage writes. A task
-- belongs to one run, so the key is as unique as before.
CREATE TABLE workflow_stages_by_run (
  root_task_id TEXT NOT NULL,
  task_id TEXT NOT NULL,
  stage_index INTEGER NOT NULL,
  node_id TEXT NOT NULL,
  node_status TEXT NOT NULL,
  record TEXT NOT NULL,
  started_at INTEGER NOT NULL,
  completed_at INTEGER NOT NULL,
  PRIMARY KEY (root_task_id, task_id, stage_index)
) WITHOUT ROWID;
INSERT INTO workflow_stages_by_run
  (root_task_id, task_id, stage_index, node_id, node_status, record, started_at, completed_at)
  SELECT root_task_id, task_id, stage_index, node_id, node_status, record, started_at, completed_at
  FROM workflow_stages;
DROP TABLE workflow_stages;
ALTER TABLE workflow_stages_by_run RENAME TO workflow_stages;
