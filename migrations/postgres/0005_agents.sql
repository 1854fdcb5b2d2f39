-- The multi-agent runtime (src/agents): definitions that survive a restart, plus seed 004's three tables.
CREATE TABLE agents (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  role TEXT NOT NULL DEFAULT '',
  config TEXT NOT NULL DEFAULT '{}',
  state TEXT NOT NULL DEFAULT 'idle',
  current_task TEXT,
  status TEXT NOT NULL DEFAULT 'active',
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  terminated_at BIGINT
);
CREATE INDEX agents_status ON agents (status);

CREATE TABLE agent_conversations (
  id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  agent_id TEXT NOT NULL,
  timestamp BIGINT NOT NULL,
  sender TEXT NOT NULL,
  content TEXT NOT NULL,
  recipient TEXT
);
CREATE INDEX agent_conversations_agent ON agent_conversations (agent_id, id);

CREATE TABLE agent_tasks (
  id TEXT PRIMARY KEY,
  agent_id TEXT NOT NULL,
  task_name TEXT NOT NULL,
  status TEXT NOT NULL,
  result TEXT,
  created_at BIGINT NOT NULL,
  completed_at BIGINT
);
CREATE INDEX agent_tasks_agent ON agent_tasks (agent_id, created_at);

CREATE TABLE agent_state_history (
  id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  agent_id TEXT NOT NULL,
  old_state TEXT NOT NULL,
  new_state TEXT NOT NULL,
  reason TEXT,
  timestamp BIGINT NOT NULL
);
CREATE INDEX agent_state_history_agent ON agent_state_history (agent_id, id);
