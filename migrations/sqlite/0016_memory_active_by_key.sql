-- The active, unarchived entries of a session key, newest first, from the index alone: automatic recall
-- reads them to leave a session's context out of its search (src/memory/service/recall.ts), and walking the
-- (session_key, memory_id) index instead read every row the key ever had (4.6 ms per turn at 10,000).
CREATE INDEX memory_entries_active_by_key ON memory_entries (session_key, memory_id)
  WHERE state = 'active' AND archived_at_ms IS NULL;
