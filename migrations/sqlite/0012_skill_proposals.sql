-- Skills from experience (src/skills/experience.ts): one row per recurring pattern found in ledger findings.
-- The pattern key makes each pattern proposed once; `sources` holds the findings it was found in (JSON).
CREATE TABLE skill_proposals (
  id TEXT PRIMARY KEY,
  pattern_key TEXT NOT NULL UNIQUE,
  skill_name TEXT NOT NULL,
  mode TEXT NOT NULL CHECK (mode IN ('draft', 'work')),
  status TEXT NOT NULL CHECK (status IN ('draft', 'submitted', 'approved', 'rejected', 'created')),
  work_item_id TEXT,
  description TEXT NOT NULL,
  content TEXT NOT NULL,
  triggers TEXT NOT NULL,
  sources TEXT NOT NULL,
  skill_version INTEGER,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE INDEX skill_proposals_by_status ON skill_proposals (status, created_at);
CREATE INDEX skill_proposals_by_work_item ON skill_proposals (work_item_id);
