-- Workflow engine (seed 003): tasks with lineage, their stage records, telemetry events, artifacts and the
-- memory stores of the `sqlite` backend. Timestamps are epoch milliseconds; JSON is TEXT.

CREATE TABLE workflow_tasks (
  task_id TEXT PRIMARY KEY,
  root_task_id TEXT NOT NULL,
  workflow_id TEXT NOT NULL,
  parent_task_id TEXT,
  lineage_type TEXT CHECK (lineage_type IN ('clone', 'subtask')),
  lifecycle TEXT NOT NULL,
  status TEXT NOT NULL,
  record TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  completed_at BIGINT
);
CREATE INDEX workflow_tasks_by_root ON workflow_tasks (root_task_id, created_at);
CREATE INDEX workflow_tasks_by_workflow ON workflow_tasks (workflow_id, created_at);

CREATE TABLE workflow_stages (
  task_id TEXT NOT NULL,
  stage_index INTEGER NOT NULL,
  root_task_id TEXT NOT NULL,
  node_id TEXT NOT NULL,
  node_status TEXT NOT NULL,
  record TEXT NOT NULL,
  started_at BIGINT NOT NULL,
  completed_at BIGINT NOT NULL,
  PRIMARY KEY (task_id, stage_index)
);
CREATE INDEX workflow_stages_by_root ON workflow_stages (root_task_id, completed_at);

CREATE TABLE workflow_events (
  event_id TEXT PRIMARY KEY,
  root_task_id TEXT NOT NULL,
  task_id TEXT NOT NULL,
  seq BIGINT NOT NULL,
  stage_id TEXT,
  type TEXT NOT NULL,
  at BIGINT NOT NULL,
  payload TEXT NOT NULL
);
CREATE INDEX workflow_events_by_root ON workflow_events (root_task_id, seq);

CREATE TABLE workflow_artifacts (
  artifact_id TEXT PRIMARY KEY,
  root_task_id TEXT NOT NULL,
  task_id TEXT NOT NULL,
  node_id TEXT,
  type TEXT NOT NULL CHECK (type IN ('node_output', 'tool_result', 'telemetry_snapshot')),
  created_at BIGINT NOT NULL,
  payload TEXT NOT NULL,
  metadata TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX workflow_artifacts_by_task ON workflow_artifacts (task_id, created_at);
CREATE INDEX workflow_artifacts_by_node ON workflow_artifacts (node_id, created_at);
CREATE INDEX workflow_artifacts_by_root ON workflow_artifacts (root_task_id, created_at);

CREATE TABLE workflow_memory (
  id TEXT PRIMARY KEY,
  scope TEXT NOT NULL,
  store TEXT NOT NULL CHECK (store IN ('task', 'project', 'global')),
  seq BIGINT NOT NULL,
  task_id TEXT,
  project_id TEXT NOT NULL,
  payload TEXT NOT NULL,
  tags TEXT NOT NULL DEFAULT '[]',
  protected INTEGER NOT NULL DEFAULT 0,
  metadata TEXT NOT NULL DEFAULT '{}',
  created_at INTEGER NOT NULL
);
CREATE INDEX workflow_memory_by_store ON workflow_memory (scope, store, seq);
