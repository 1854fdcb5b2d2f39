-- Fewer indexes per ledger append (docs/storage.md, docs/ledger.md), as on SQLite.
--
-- The only reader of the type/time index lists recent findings (`entry_type = 'finding'`, newest first), so
-- it keeps findings alone: an append of any other type updates the primary key's index only. (SQLite also
-- rebuilds the table WITHOUT ROWID; a Postgres table is a heap with its primary key's index either way.)

DROP INDEX work_ledger_by_type_time;
CREATE INDEX work_ledger_findings_by_time ON work_ledger (created_at) WHERE entry_type = 'finding';
