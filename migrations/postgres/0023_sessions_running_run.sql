-- The chat run in progress of a session lives on its row (src/store/session-store.ts, docs/storage.md).
--
-- A chat turn marked its run running in a `kv` row in the commit of the user's message and deleted that row
-- in the commit of the reply: another table's row and index entries per turn, in commits that already update
-- the session's row for its message count. A session key runs one turn at a time, so one column pair is enough.
ALTER TABLE sessions ADD COLUMN running_run_id TEXT;
ALTER TABLE sessions ADD COLUMN running_started_at BIGINT;

-- Runs an older agentd left marked running (it stopped during them) stay marked, on their key's newest row.
UPDATE sessions SET
  running_run_id = marked.run_id,
  running_started_at = marked.started_at
FROM (
  SELECT DISTINCT ON (value::jsonb ->> 'sessionKey')
    value::jsonb ->> 'sessionKey' AS session_key,
    value::jsonb ->> 'runId' AS run_id,
    (value::jsonb ->> 'startedAt')::bigint AS started_at
  FROM kv WHERE namespace = 'chat-running'
  ORDER BY value::jsonb ->> 'sessionKey', (value::jsonb ->> 'startedAt')::bigint DESC
) marked
WHERE sessions.session_key = marked.session_key
  AND sessions.id = (
    SELECT s.id FROM sessions s WHERE s.session_key = marked.session_key ORDER BY s.created_at DESC, s.id DESC LIMIT 1);

DELETE FROM kv WHERE namespace = 'chat-running';
