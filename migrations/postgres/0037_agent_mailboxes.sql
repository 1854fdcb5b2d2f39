-- Agents' mailboxes on disk (src/agents/runtime.ts, docs/agents.md): a message, broadcast or task an agent
-- has accepted and not yet answered. Written before the send is acknowledged, deleted when its turn ends, read
-- back by start() after a restart or a crash. `owner` is the process whose mailbox holds it: another process's
-- start() takes it only once that process is gone. `attempts` counts the starts that found it first in line.
CREATE TABLE agent_mailbox (
  seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  agent_id TEXT NOT NULL,
  kind TEXT NOT NULL,
  sender TEXT NOT NULL,
  content TEXT NOT NULL,
  task_id TEXT,
  owner TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  created_at BIGINT NOT NULL
);
CREATE INDEX agent_mailbox_agent ON agent_mailbox (agent_id, seq);
