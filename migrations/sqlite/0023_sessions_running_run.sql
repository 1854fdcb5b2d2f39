-- The chat run in progress of a session lives on its row (src/store/session-store.ts, docs/storage.md).
--
-- A chat turn marked its run running in a `kv` row in the commit of the user's message and deleted that row
-- in the commit of the reply: two pages of another B-tree per turn, in commits that already update the
-- session's row for its message count. A session key runs one turn at a time, so one column pair is enough.
ALTER TABLE sessions ADD COLUMN running_run_id TEXT;
ALTER TABLE sessions ADD COLUMN running_started_at INTEGER;

-- Runs an older agentd left marked running (it stopped during them) stay marked, on their key's newest row.
UPDATE sessions SET
  running_run_id = (
    SELECT json_extract(k.value, '$.runId') FROM kv k
    WHERE k.namespace = 'chat-running' AND json_extract(k.value, '$.sessionKey') = sessions.session_key
    ORDER BY json_extract(k.value, '$.startedAt') DESC LIMIT 1),
  running_started_at = (
    SELECT json_extract(k.value, '$.startedAt') FROM kv k
    WHERE k.namespace = 'chat-running' AND json_extract(k.value, '$.sessionKey') = sessions.session_key
    ORDER BY json_extract(k.value, '$.startedAt') DESC LIMIT 1)
WHERE id = (
  SELECT s.id FROM sessions s WHERE s.session_key = sessions.session_key ORDER BY s.created_at DESC, s.id DESC LIMIT 1)
  AND EXISTS (
    SELECT 1 FROM kv k
    WHERE k.namespace = 'chat-running' AND json_extract(k.value, '$.sessionKey') = sessions.session_key);

DELETE FROM kv WHERE namespace = 'chat-running';
