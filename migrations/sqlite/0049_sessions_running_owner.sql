-- The process that marked a session's chat run running (src/store/session-store.ts `markRunning`,
-- docs/storage.md "Crash windows in a chat turn"): `<host>/<pid>/<uuid>@<start>`, as agent mailbox rows name theirs.
-- Several agentd processes may share one database; at start each ended every run still marked as one a crash
-- had cut off, the live runs of the others too (a note in their transcripts, an error final), and replayed
-- their waiting messages (which name their owner in the inbox's JSON), which then ran twice. A start now
-- leaves the runs and messages of an owner of this host that may be alive: one of its own process still open,
-- or a live process; another host's, while its lease holds (migration 0050). Written by the
-- statement that marks the run anyway: no page more. A mark of an older agentd names no owner and is ended at
-- the next start, as before.
ALTER TABLE sessions ADD COLUMN running_owner TEXT;
