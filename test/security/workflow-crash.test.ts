import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { connectGateway, type GatewayClient } from '../../src/cli/gateway-client.js';
import { createScratchPostgresDatabase } from '../helpers/databases.js';
import { kill, type Served, serve } from '../helpers/serve-process.js';
import { tempHome } from '../runtime/helpers.js';
import { edge, node, workflowYaml } from '../workflow/helpers.js';

/**
 * kill -9 of a real `agentd serve` while a durable workflow run waits in a node, then a restart on the same
 * home and database. Before run owners the run's rows said `in_progress` for ever; and `workflow.inspect`
 * over the gateway answered NOT_FOUND for any run of a workflow the new process had not loaded.
 */

const runLeaseMs = 300;

function homeWithHangingWorkflow(prefix: string): string {
  const home = tempHome(prefix);
  writeFileSync(join(home, 'agentd.yaml'), stringify({ workflows: { runLeaseMs } }));
  const dir = join(home, 'workflow-library', 'hang');
  mkdirSync(dir, { recursive: true });
  const files: Record<string, string> = {
    'workflow.yaml': stringify(
      workflowYaml(
        [
          node('start', 'start'),
          node('prepare', 'linear'),
          node('wait', 'linear', { tools: ['hold'] }),
          node('done', 'exit'),
        ],
        [edge('start', 'prepare'), edge('prepare', 'wait'), edge('wait', 'done')],
        { id: 'hang' },
      ),
    ),
    'tools.yaml': stringify({ tools: [{ id: 'hold', entrypoint: './tools.mjs#hold' }] }),
    // Never answers: the process is killed while the run waits here.
    'tools.mjs': 'export const hold = () => new Promise(() => {});\n',
  };
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return home;
}

interface Inspected {
  report: {
    task: { state: string; lifecycle: string; status?: string; error?: { code: string; message: string } };
    history: Array<{ nodeId: string }>;
  };
}

async function inspect(client: GatewayClient, taskId: string) {
  return (await client.call<Inspected>('workflow.inspect', { taskId })).report;
}

/** The stage rows of the run in the server's database, read from outside the server. */
async function storedStages(home: string, databaseUrl: string | undefined, taskId: string): Promise<number> {
  const count = 'SELECT COUNT(*) AS n FROM workflow_stages WHERE root_task_id = ';
  if (databaseUrl) {
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    try {
      return Number((await client.query<{ n: string }>(`${count}$1`, [taskId])).rows[0]?.n);
    } finally {
      await client.end();
    }
  }
  const db = new Database(join(home, 'agentd.db'), { fileMustExist: true });
  try {
    return Number((db.prepare(`${count}?`).get(taskId) as { n: number }).n);
  } finally {
    db.close();
  }
}

async function crashMidRun(home: string, databaseUrl: string | undefined) {
  let served: Served = await serve(home, databaseUrl);
  let client = await connectGateway({ url: served.url, token: served.token });
  const { taskId } = await client.call<{ taskId: string }>('workflow.run', { dir: 'hang', wait: false });
  // Waiting in `wait`: `prepare` is recorded, the run is open.
  await expect
    .poll(
      async () =>
        (await inspect(client, taskId).catch(() => undefined))?.history.map((stage) => stage.nodeId),
      {
        timeout: 10_000,
        interval: 50,
      },
    )
    .toEqual(['start', 'prepare']);
  expect((await inspect(client, taskId)).task).toMatchObject({ state: 'in_progress', lifecycle: 'active' });
  // What the server showed was its memory: the kill comes once its records are on disk, as a crash after
  // the run's first stages would find them (on Postgres a batch is a round trip behind).
  await expect.poll(() => storedStages(home, databaseUrl, taskId), { timeout: 10_000, interval: 50 }).toBe(2);
  await client.close();
  await kill(served);

  served = await serve(home, databaseUrl);
  client = await connectGateway({ url: served.url, token: served.token });
  try {
    // Read from the database (this process loaded no workflow), and concluded once the dead lease lapsed.
    await expect
      .poll(async () => (await inspect(client, taskId)).task.state, { timeout: 10_000, interval: 50 })
      .toBe('failed');
    const report = await inspect(client, taskId);
    expect(report.task).toMatchObject({
      lifecycle: 'concluded',
      status: 'failure',
      error: { code: 'INTERRUPTED' },
    });
    // What ran before the crash is kept.
    expect(report.history.map((stage) => stage.nodeId)).toEqual(['start', 'prepare']);
    // The restarted process runs the workflow again, under its own lease, unaffected.
    const again = await client.call<{ taskId: string }>('workflow.run', { dir: 'hang', wait: false });
    await expect
      .poll(async () => (await inspect(client, again.taskId).catch(() => undefined))?.task.state, {
        timeout: 10_000,
        interval: 50,
      })
      .toBe('in_progress');
    // Several of its leases later, it is still its process's, alive.
    await new Promise((resume) => setTimeout(resume, 4 * runLeaseMs));
    expect((await inspect(client, again.taskId)).task.state).toBe('in_progress');
  } finally {
    await client.close();
    await kill(served);
  }
}

describe('kill -9 of agentd serve during a durable workflow run', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const cleanup of cleanups) await cleanup();
  });

  it('shows the run failed INTERRUPTED after the restart, its stages kept, on SQLite', async () => {
    await crashMidRun(homeWithHangingWorkflow('agentd-wf-crash-sqlite-'), undefined);
  }, 60_000);

  it('the same on Postgres', async () => {
    const database = await createScratchPostgresDatabase('agentd_wf_crash');
    cleanups.push(() => database.drop());
    await crashMidRun(homeWithHangingWorkflow('agentd-wf-crash-pg-'), database.url);
  }, 60_000);
});
