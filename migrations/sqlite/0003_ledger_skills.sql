-- The typed, append-only work ledger (seed 002) and the skill activation / provenance tables.
-- work_item_id has no foreign key: a chat session's implicit work item may be created lazily, and the ledger
-- must accept entries for it either way.

CREATE TABLE work_ledger (
  work_item_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  entry_type TEXT NOT NULL CHECK (entry_type IN ('plan', 'finding', 'decision', 'step', 'error', 'note')),
  content TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (work_item_id, seq)
);
CREATE INDEX work_ledger_by_type_time ON work_ledger (entry_type, created_at);

-- The last seq handed out per work item. Bumped in the same transaction as the insert, so the counter row
-- lock serialises concurrent appenders (on Postgres across processes) and a rolled-back append leaves no gap.
CREATE TABLE work_ledger_heads (
  work_item_id TEXT PRIMARY KEY,
  last_seq INTEGER NOT NULL
);

CREATE TRIGGER work_ledger_no_update BEFORE UPDATE ON work_ledger
BEGIN
  SELECT RAISE(ABORT, 'work_ledger is append-only');
END;
CREATE TRIGGER work_ledger_no_delete BEFORE DELETE ON work_ledger
BEGIN
  SELECT RAISE(ABORT, 'work_ledger is append-only');
END;

CREATE TABLE skill_activations (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  skill_name TEXT NOT NULL,
  skill_version INTEGER NOT NULL,
  activation_type TEXT NOT NULL CHECK (activation_type IN ('manual', 'auto')),
  work_item_id TEXT,
  run_id TEXT,
  agent_id TEXT,
  activated_at INTEGER NOT NULL
);
CREATE INDEX skill_activations_by_skill ON skill_activations (skill_name, activated_at);

CREATE TABLE skill_provenance (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  skill_name TEXT NOT NULL,
  skill_version INTEGER NOT NULL,
  source_type TEXT NOT NULL CHECK (source_type IN ('work_item', 'ledger_entry')),
  work_item_id TEXT,
  ledger_seq INTEGER,
  content_snippet TEXT,
  created_at INTEGER NOT NULL
);
CREATE INDEX skill_provenance_by_skill ON skill_provenance (skill_name, skill_version);
