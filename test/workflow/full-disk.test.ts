import { Readable } from 'node:stream';
import { afterEach, expect, it } from 'vitest';
import { createRecordingLogger } from '../../src/util/index.js';
import { runWorkflowRepl } from '../../src/workflow/engine-entry.js';
import type { WorkflowEngine } from '../../src/workflow/index.js';
import { describeEachDatabase } from '../helpers/databases.js';
import { createFaultyDatabase } from '../helpers/faulty-database.js';
import { chainWorkflow, engineFor, workflowYaml } from './helpers.js';

const engines: WorkflowEngine[] = [];
afterEach(async () => {
  await Promise.all(engines.splice(0).map((engine) => engine.close()));
});

const files = {
  'workflow.yaml': { ...workflowYaml(chainWorkflow(2).nodes, chainWorkflow(2).edges), id: 'full-disk' },
};
const functions = {
  n1: (input: unknown) => ({ v: (input as { v: number }).v + 1 }),
  n2: (input: unknown) => ({ v: (input as { v: number }).v * 10 }),
};

describeEachDatabase('a durable run on a full disk', (getDb) => {
  it('names the records it could not write in its result, and a run after the disk is back is stored whole', async () => {
    const faulty = createFaultyDatabase(getDb());
    // retainRuns 0: what `inspect` shows comes from the database, as after a restart.
    const engine = await engineFor(files, { functions, database: faulty, retainRuns: 0 });
    engines.push(engine);

    faulty.failWrites();
    const lost = await engine.run({ v: 1 });
    expect(lost.status).toBe('success');
    expect(lost.output).toEqual({ v: 20 });
    expect(faulty.refused).toBeGreaterThan(0);
    expect(lost.recordsNotWritten).toMatchObject({
      code: 'RECORDS_NOT_WRITTEN',
      cause: 'STORE_UNAVAILABLE',
      failedWrites: expect.any(Number),
    });
    expect(lost.recordsNotWritten!.failedWrites).toBeGreaterThan(0);
    expect(lost.recordsNotWritten!.message).not.toContain(faulty.location);
    expect(await engine.inspect(lost.taskId)).toBeUndefined();

    faulty.heal();
    const stored = await engine.run({ v: 2 });
    expect(stored.recordsNotWritten).toBeUndefined();
    expect(stored).not.toHaveProperty('recordsNotWritten');
    const reader = await engineFor(files, { database: getDb() });
    engines.push(reader);
    expect((await reader.inspect(stored.taskId))?.task).toMatchObject({ state: 'completed' });
  });

  it('an engine made while the disk is full still runs: its sweep of interrupted runs is refused and logged', async () => {
    const faulty = createFaultyDatabase(getDb());
    faulty.failWrites();
    const logger = createRecordingLogger();
    const engine = await engineFor(files, { functions, database: faulty, logger });
    engines.push(engine);
    expect(
      logger.records.some((line) => line.message === 'could not conclude the interrupted workflow runs'),
    ).toBe(true);
    const run = await engine.run({ v: 1 });
    expect(run).toMatchObject({ status: 'success', output: { v: 20 }, recordsNotWritten: expect.anything() });
  });

  it('says so in the REPL, under the run it reports', async () => {
    const faulty = createFaultyDatabase(getDb());
    const engine = await engineFor(files, { functions, database: faulty });
    engines.push(engine);
    faulty.failWrites();
    let printed = '';
    // A plain line is a request: the run gets `{ request: 'hello' }` and ends; the writes of its records fail.
    await runWorkflowRepl({
      engine,
      io: { input: Readable.from(['hello\n']), write: (text) => (printed += text) },
    });
    expect(printed).toMatch(/\[success\] task wft_\d+/);
    expect(printed).toMatch(
      /! \d+ of this run's record writes failed \(STORE_UNAVAILABLE\).*\(RECORDS_NOT_WRITTEN\)/,
    );
  });
});
