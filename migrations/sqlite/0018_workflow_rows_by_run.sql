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

-- Events the same way: a run's events are read by root task in sequence order and by nothing else, and the
-- event id is `<root task id>:<seq>`, so the key (root_task_id, seq) is as unique as the id was.
CREATE TABLE workflow_events_by_run (
  root_task_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  event_id TEXT NOT NULL,
  task_id TEXT NOT NULL,
  stage_id TEXT,
  type TEXT NOT NULL,
  at INTEGER NOT NULL,
  payload TEXT NOT NULL,
  PRIMARY KEY (root_task_id, seq)
) WITHOUT ROWID;
INSERT INTO workflow_events_by_run (root_task_id, seq, event_id, task_id, stage_id, type, at, payload)
  SELECT root_task_id, seq, event_id, task_id, stage_id, type, at, payload FROM workflow_events;
DROP TABLE workflow_events;
ALTER TABLE workflow_events_by_run RENAME TO workflow_events;

-- Artifacts are read back by run only (`loadRun`); queries by task or node are answered in memory.
DROP INDEX workflow_artifacts_by_task;
DROP INDEX workflow_artifacts_by_node;
