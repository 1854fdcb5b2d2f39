-- A session key's summaries have an index of their own (docs/decisions/0036-session-lists-by-memory-id.md).
--
-- A session's lists are read newest written first, its range of the (session_key, memory_id) key backwards,
-- stopping after `limit` rows pass the filter. Summaries are few in that range, so a list of a session's
-- summaries (the first step of memory.recall) walked all of it to find the few or none there are: 1,000
-- entries of a session read to return none. This partial index holds summaries only, so commits of plain
-- entries write nothing to it; a read of summaries says so literally (`kind <> 'entry'`), as for the
-- summaries' index by agent (migration 0024).
CREATE INDEX memory_entries_summaries_by_session ON memory_entries (session_key, memory_id) WHERE kind <> 'entry';
