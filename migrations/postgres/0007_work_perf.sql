-- Work queue claim as a function (src/work/queue.ts), so its plan does not depend on table statistics.
--
-- The claim wants the first ready rows in `work_items_ready` order (an ordered index scan that stops after
-- `p_limit` rows). When the statistics say few rows are queued (a fresh table, or a burst of submissions
-- into a large table that autovacuum has not analysed yet), the planner prefers a bitmap scan of every
-- queued row plus a sort, so each claim costs O(queue length): 2.7 ms instead of 0.4 ms with 2,600 queued
-- in the measurement recorded in docs/work.md. The SET clauses apply only while the function runs; a
-- PL/pgSQL function also keeps its plan per connection, so the statement is not planned on every claim.
CREATE FUNCTION work_claim(
  p_now BIGINT,
  p_limit INTEGER,
  p_worker TEXT,
  p_lease_ms BIGINT,
  p_start BOOLEAN,
  p_kinds TEXT[],
  p_exclude_kinds TEXT[],
  p_agent_ids TEXT[]
) RETURNS SETOF work_items
LANGUAGE plpgsql
SET enable_bitmapscan = off
SET enable_seqscan = off
SET enable_sort = off
AS $$
BEGIN
  -- The candidates come from a CTE, evaluated once: as `id IN (subquery)` the planner may re-run the
  -- locking subquery per row and claim more than p_limit.
  RETURN QUERY
  WITH next AS (
    SELECT candidate.id
    FROM work_items AS candidate
    WHERE candidate.state = 'queued'
      AND candidate.run_after <= p_now
      AND (p_kinds IS NULL OR candidate.kind = ANY (p_kinds))
      AND (p_exclude_kinds IS NULL OR candidate.kind <> ALL (p_exclude_kinds))
      AND (p_agent_ids IS NULL OR candidate.agent_id = ANY (p_agent_ids))
    ORDER BY candidate.priority DESC, candidate.created_at, candidate.id
    LIMIT p_limit
    FOR UPDATE SKIP LOCKED
  )
  UPDATE work_items AS item SET
    state = CASE WHEN p_start THEN 'running' ELSE 'claimed' END,
    lease_owner = p_worker,
    lease_expires_at = p_now + p_lease_ms,
    attempts = item.attempts + 1,
    updated_at = p_now,
    state_reason = NULL,
    started_at = CASE WHEN p_start THEN p_now ELSE item.started_at END
  FROM next
  WHERE item.id = next.id
  RETURNING item.*;
END;
$$;
