-- Workflow stage rows keyed in their run's order: `loadRun` reads a run's stages by root task, task and
-- index, and nothing reads them by task alone. One index, the key (root_task_id, task_id, stage_index),
-- instead of the (task_id, stage_index) key and the (root_task_id, completed_at) index of 0006: since a
-- stage is one row (record version 2, src/workflow/records.ts), each index left out is a good part of what
-- a durable stage writes. A task belongs to one run, so the key is as unique as before.
ALTER TABLE workflow_stages DROP CONSTRAINT workflow_stages_pkey;
ALTER TABLE workflow_stages ADD PRIMARY KEY (root_task_id, task_id, stage_index);
DROP INDEX workflow_stages_by_root;

-- Events the same way: read by root task in sequence order and by nothing else; the event id is
-- `<root task id>:<seq>`, so the key (root_task_id, seq) is as unique as the id was.
ALTER TABLE workflow_events DROP CONSTRAINT workflow_events_pkey;
ALTER TABLE workflow_events ADD PRIMARY KEY (root_task_id, seq);
DROP INDEX workflow_events_by_root;

-- Artifacts are read back by run only (`loadRun`); queries by task or node are answered in memory.
DROP INDEX workflow_artifacts_by_task;
DROP INDEX workflow_artifacts_by_node;
