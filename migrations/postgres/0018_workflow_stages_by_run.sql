-- Workflow stage rows keyed in their run's order: `loadRun` reads a run's stages by root task, task and
-- index, and nothing reads them by task alone. One index, the key (root_task_id, task_id, stage_index),
-- instead of the (task_id, stage_index) key and the (root_task_id, completed_at) index of 0006: since a
-- stage is one row (record version 2, src/workflow/records.ts), each index left out is a good part of what
-- a durable stage writes. A task belongs to one run, so the key is as unique as before.
ALTER TABLE workflow_stages DROP CONSTRAINT workflow_stages_pkey;
ALTER TABLE workflow_stages ADD PRIMARY KEY (root_task_id, task_id, stage_index);
DROP INDEX workflow_stages_by_root;
