-- Fewer B-trees per ledger append (docs/storage.md, docs/ledger.md).
--
-- Every `ledger_append` is a commit of its own, made before the tool call returns. As a rowid table with a
-- (work_item_id, seq) key, each append wrote the table, the key's automatic index and the type/time index:
-- three B-trees, each a WAL frame or more. Keyed WITHOUT ROWID, the rows are stored in the order the ledger
-- reads them (a work item's entries by seq; the append's MAX(seq) is the key's last entry) and the key index
-- goes. The only reader of the type/time index lists recent findings, so it keeps findings alone: an append
-- of any other type writes one B-tree, a finding two.

CREATE TABLE work_ledger_keyed (
  work_item_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  entry_type TEXT NOT NULL CHECK (entry_type IN ('plan', 'finding', 'decision', 'step', 'error', 'note')),
  content TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (work_item_id, seq)
) WITHOUT ROWID;
INSERT INTO work_ledger_keyed (work_item_id, seq, entry_type, content, created_at)
SELECT work_item_id, seq, entry_type, content, created_at FROM work_ledger;
DROP TABLE work_ledger;
ALTER TABLE work_ledger_keyed RENAME TO work_ledger;
CREATE INDEX work_ledger_findings_by_time ON work_ledger (created_at) WHERE entry_type = 'finding';

CREATE TRIGGER work_ledger_no_update BEFORE UPDATE ON work_ledger
BEGIN
  SELECT RAISE(ABORT, 'work_ledger is append-only');
END;
CREATE TRIGGER work_ledger_no_delete BEFORE DELETE ON work_ledger
BEGIN
  SELECT RAISE(ABORT, 'work_ledger is append-only');
END;
