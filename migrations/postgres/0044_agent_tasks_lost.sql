-- Tasks whose message a version before agent mailboxes lost (docs/agents.md, "Retention"). Before migration
-- 0037 an agent's mailbox was in memory only, so a task assigned and not yet answered when agentd stopped kept
-- its status, assigned or in_progress, with nothing left to run it: nothing ever ended it, the retention keeps
-- live tasks, and agents.history showed it waiting for good. Since 0037 a task and its message are written
-- together and the message stays until the task's end is written, so a live task with no message is one of
-- those: it ends failed, saying why.
UPDATE agent_tasks
SET status = 'failed',
  result = 'its message was lost when agentd stopped: versions before agent mailboxes kept messages in memory only',
  completed_at = (EXTRACT(EPOCH FROM now()) * 1000)::BIGINT
WHERE status IN ('assigned', 'in_progress')
  AND NOT EXISTS (SELECT 1 FROM agent_mailbox WHERE agent_mailbox.task_id = agent_tasks.id);
