-- The items of a state resolved most recently (src/work/awareness.ts: a work item's run is told what its
-- siblings finished lately). With only (state, updated_at) and (resolved_at) to choose from, SQLite read
-- every completed item and sorted them for each run, so a run's cost grew with the queue's whole history.
-- This index answers `state = ? AND resolved_at >= ? ORDER BY resolved_at DESC, id DESC LIMIT n` by
-- reading n entries.
CREATE INDEX work_items_state_resolved ON work_items (state, resolved_at, id) WHERE resolved_at IS NOT NULL;
