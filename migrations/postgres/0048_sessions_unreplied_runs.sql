-- How the last chat runs of a session row that wrote no reply ended (src/store/session-store.ts
-- `markEndedWithoutReply`, docs/storage.md). Such a run (it failed, answered nothing, or was stopped before it
-- said anything) leaves only its user message in the transcript, so after a restart its idempotency key was
-- answered RUN_OUTCOME_UNKNOWN. Its end is written by the statement that clears its running mark anyway: the
-- row's own write, no page more; a run with a reply writes nothing here. The row keeps its last 4 such runs.
-- Versioned JSON: {"v":1,"runs":[{"runId","status","error"?,"endedAt"}, …]}, oldest first.
ALTER TABLE sessions ADD COLUMN unreplied_runs TEXT;
