-- Pruning agent tasks (src/agents/retention.ts, docs/agents.md "Retention") and the reader it keeps right,
-- `tasks()` (`agents.history`), both take an agent's tasks in (created_at, id) order: the reader its newest,
-- the prune its oldest ended ones past the count it keeps, a batch at a time from where the last ended. With
-- agent_tasks_agent on (agent_id, created_at) alone, the reader sorted each agent's rows of one millisecond by
-- id, and a batch could not start within them. A task's writes change as many index entries as before.
DROP INDEX agent_tasks_agent;
CREATE INDEX agent_tasks_by_agent ON agent_tasks (agent_id, created_at, id);
