-- Scheduled jobs (src/cron): each submits a work item or sends a chat message when due.
CREATE TABLE cron_jobs (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  description TEXT NOT NULL DEFAULT '',
  agent_id TEXT NOT NULL,
  session_key TEXT NOT NULL,
  schedule TEXT NOT NULL,
  payload TEXT NOT NULL,
  enabled INTEGER NOT NULL DEFAULT 1,
  delete_after_run INTEGER NOT NULL DEFAULT 0,
  next_run_at BIGINT,
  last_run_at BIGINT,
  last_status TEXT,
  last_error TEXT,
  last_work_item_id TEXT,
  last_run_id TEXT,
  run_count INTEGER NOT NULL DEFAULT 0,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);
CREATE INDEX cron_jobs_due ON cron_jobs (enabled, next_run_at);
