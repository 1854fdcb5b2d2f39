-- Pruning ended work items (src/work/retention.ts, docs/work.md "Retention"). A prune walks the items that
-- ended before a cutoff in resolved_at order, a batch at a time: those of each terminal state through
-- work_items_state_resolved (0019), and those of each system kind, kept for a shorter time, through this
-- index. Without it the system kinds' cutoff, a day, would be found among the month of other work kept by
-- then, read again at every prune.
--
-- work_items_resolved goes: no statement reads by resolved_at across states (the digest, the heartbeat and
-- the prune name their states), and while it stood, Postgres, which cannot know that a kind's items all
-- ended recently, read a kind's prune through it and filtered out the month of other work. An item's end
-- writes as many index entries as before.
DROP INDEX work_items_resolved;
CREATE INDEX work_items_ended_by_kind ON work_items (kind, resolved_at) WHERE resolved_at IS NOT NULL;
