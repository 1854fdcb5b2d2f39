// Writes test/fixtures/workflow-records/v<N>-rows.json: the rows the current engine stores for a fixed run
// (a decision, a branch with a tolerated failure, a merge; and a run stopped by the decision), N being the
// current record version. Run it once when `workflowRecordVersion` (src/workflow/records.ts) goes up; the
// files of earlier versions stay as they are, and test/workflow/records.test.ts reads every one of them.
// Run: `npx tsx scripts/workflow-record-fixtures.ts`.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { createStore } from '../src/store/index.js';
import { createManualClock } from '../src/util/index.js';
import { createWorkflowEngine, loadWorkflow } from '../src/workflow/index.js';
import { workflowRecordVersion } from '../src/workflow/records.js';

const node = (id: string, role: string, extra: Record<string, unknown> = {}) => ({
  id,
  role,
  kind: 'deterministic',
  context: 'none',
  ...extra,
});
const edge = (from: string, to: string, label?: string) => (label ? { from, to, label } : { from, to });

const work = mkdtempSync(join(tmpdir(), 'agentd-record-fixtures-'));
try {
  const dir = join(work, 'flow');
  mkdirSync(dir);
  writeFileSync(
    join(dir, 'workflow.yaml'),
    stringify({
      version: 1,
      id: 'fixture-flow',
      nodes: [
        node('start', 'start'),
        node('pick', 'decision'),
        node('fan', 'branch'),
        node('left', 'linear'),
        node('right', 'linear', { continue_on_failure: true }),
        node('join', 'merge', { merge_failure_mode: 'partial' }),
        node('done', 'exit'),
        node('stop', 'exit'),
      ],
      edges: [
        edge('start', 'pick'),
        edge('pick', 'fan', 'go'),
        edge('pick', 'stop', 'halt'),
        edge('fan', 'left', 'l'),
        edge('fan', 'right', 'r'),
        edge('left', 'join'),
        edge('right', 'join'),
        edge('join', 'done'),
      ],
    }),
  );
  const store = await createStore({ stateDir: join(work, 'state') });
  const engine = await createWorkflowEngine({
    workflow: await loadWorkflow(dir),
    database: store.db,
    workDir: dir,
    clock: createManualClock(1_763_000_000_000),
    idGenerator: (prefix = 'id') => `${prefix}_fixture`,
    functions: {
      pick: (input) => ((input as { go: boolean }).go ? 'go' : 'halt'),
      left: (input) => ({ left: input }),
      right: () => {
        throw new Error('right arm failed');
      },
    },
  });
  await engine.run({ go: true, request: 'branch and merge' }, { taskId: 'wft_fixture_branch' });
  await engine.run({ go: false }, { taskId: 'wft_fixture_halt' });
  await engine.close();
  const rows: Record<string, unknown[]> = {};
  // A SQLite store (no databaseUrl was given). Stages and events are WITHOUT ROWID tables (migration 0018)
  // in run order by their keys; for the others rowid is the order of insertion.
  const order: Record<string, string> = {
    workflow_tasks: 'rowid',
    workflow_stages: 'root_task_id, task_id, stage_index',
    workflow_events: 'root_task_id, seq',
    workflow_artifacts: 'rowid',
  };
  for (const [table, orderBy] of Object.entries(order))
    rows[table] = await store.db.all(`SELECT * FROM ${table} ORDER BY ${orderBy}`);
  await store.close();
  const out = join(
    dirname(fileURLToPath(import.meta.url)),
    '..',
    'test',
    'fixtures',
    'workflow-records',
    `v${workflowRecordVersion}-rows.json`,
  );
  writeFileSync(out, `${JSON.stringify(rows, null, 2)}\n`);
  process.stdout.write(`${out}\n`);
} finally {
  rmSync(work, { recursive: true, force: true });
}
