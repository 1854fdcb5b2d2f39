import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import type { Runtime } from '../../src/runtime.js';
import type { SqlDatabase } from '../../src/store/index.js';
import { chainWorkflow, engineFor, workflowYaml, writeWorkflow } from '../workflow/helpers.js';
import { startRuntime } from './helpers.js';

let runtime: Runtime | undefined;
afterEach(async () => {
  await runtime?.close();
  runtime = undefined;
});

const chainOf = (id: string) => ({
  'workflow.yaml': workflowYaml(chainWorkflow(1).nodes, chainWorkflow(1).edges, { id }),
});

/** The database with the statements sent through it counted by text. */
function countingReads(db: SqlDatabase): { reads: string[] } {
  const reads: string[] = [];
  const all = db.all.bind(db);
  const get = db.get.bind(db);
  db.all = ((sql: string, params?: never) => {
    reads.push(sql);
    return all(sql, params);
  }) as SqlDatabase['all'];
  db.get = ((sql: string, params?: never) => {
    reads.push(sql);
    return get(sql, params);
  }) as SqlDatabase['get'];
  return { reads };
}

it('workflow.inspect reads a run no engine holds from the database once, as the workflow it is of', async () => {
  const started = await startRuntime();
  runtime = started.runtime;
  const library = join(started.runtime.state.home, 'workflow-library');
  writeWorkflow(chainOf('beta'), join(library, 'beta'));
  const client = await started.connect();
  try {
    // The server loads beta's engine by running it.
    await client.call('workflow.run', { dir: 'beta', input: 'b' }, { timeoutMs: 10_000 });
    // A run of alpha by another process on the same database (the in-process `agentd run`).
    const other = await engineFor(chainOf('alpha'), { database: started.runtime.store.db });
    const { taskId } = await other.run('a', { taskId: 'wft_alpha_elsewhere' });
    await other.close();

    const { reads } = countingReads(started.runtime.store.db);
    const { report } = await client.call<{
      report: { metadata: { workflowId: string }; summary: { workflowId: string } };
    }>('workflow.inspect', { taskId });
    expect(report.summary.workflowId).toBe('alpha');
    expect(report.metadata.workflowId).toBe('alpha');
    // The run's root found once: one read of its task id, not one per loaded engine and one more.
    expect(reads.filter((sql) => sql.startsWith('SELECT root_task_id FROM workflow_tasks'))).toHaveLength(1);
  } finally {
    await client.close();
  }
});
