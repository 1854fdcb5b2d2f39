import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import type { GatewayClient } from '../../src/cli/gateway-client.js';
import { edge, node, workflowYaml, writeWorkflow } from '../workflow/helpers.js';
import { startRuntime, tempHome } from './helpers.js';

/**
 * A workflow run is a `workflow.run` work item of the pool's workflow class. Here that class has one
 * worker, held by a `blocker` run whose tool waits on a gate, so a run of `target` (scheduler.yaml
 * `max_concurrency: 1`) waits on the queue unclaimed: what ends its item there must end the run too, and
 * free the workflow's only slot.
 */
type Gate = { promise: Promise<void>; open(): void };
/** What the nodes of a `held` run did, by task id; `release` ends a node still blocked when a test ends. */
interface RunProbe {
  blocked: string[];
  aborted: string[];
  after: string[];
  release: Gate;
}
const gates = globalThis as { __agentdDispatchGate?: Gate; __agentdRunProbe?: RunProbe };

function newGate(): Gate {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

const toolsMjs = [
  'export const hold = async (input) => { await globalThis.__agentdDispatchGate?.promise; return input; };',
  'export const echo = (input) => input;',
  '',
].join('\n');

function writeFlow(dir: string, id: string, tool: 'hold' | 'echo', maxConcurrency: number): string {
  return writeWorkflow(
    {
      'workflow.yaml': workflowYaml(
        [node('start', 'start'), node('work', 'linear', { tools: [tool] }), node('done', 'exit')],
        [edge('start', 'work'), edge('work', 'done')],
        { id },
      ),
      'tools.yaml': { tools: [{ id: tool, entrypoint: `./tools.mjs#${tool}` }] },
      'tools.mjs': toolsMjs,
      'scheduler.yaml': {
        scheduler: {
          enabled: true,
          max_concurrency: maxConcurrency,
          queue_policy: 'fifo',
          max_queue_size: 20,
        },
      },
    },
    dir,
  );
}

interface Item {
  id: string;
  kind: string;
  state: string;
  params: { taskId?: string };
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 5_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const workflowItem = (client: GatewayClient, taskId: string, state?: string) =>
  until(`the work item of ${taskId}${state ? ` (${state})` : ''}`, async () => {
    const { items } = await client.call<{ items: Item[] }>('work.list', { kind: 'workflow.run' });
    return items.find((item) => item.params.taskId === taskId && (!state || item.state === state));
  });

const concluded = (client: GatewayClient, taskId: string) =>
  until(`run ${taskId} to end`, async () => {
    const { task } = await client.call<{
      task: { status?: string; state: string; error?: { code: string; message: string } };
    }>('workflow.status', { taskId });
    return task.status ? task : undefined;
  });

let cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  gates.__agentdDispatchGate?.open();
  gates.__agentdRunProbe?.release.open();
  for (const step of cleanup.reverse()) await step();
  cleanup = [];
});

async function setup() {
  const home = tempHome('agentd-wf-dispatch-');
  writeFileSync(join(home, 'agentd.yaml'), stringify({ workers: { workflow_concurrency: 1 } }));
  const library = join(home, 'workflow-library');
  const blocker = writeFlow(join(library, 'blocker'), 'blocker', 'hold', 4);
  const target = writeFlow(join(library, 'target'), 'target', 'echo', 1);
  const twin = writeFlow(join(library, 'twin'), 'twin', 'echo', 1);
  const started = await startRuntime({ home });
  const client = await started.connect();
  cleanup.push(
    () => started.runtime.close(),
    () => client.close(),
  );
  const gate = newGate();
  gates.__agentdDispatchGate = gate;
  // The pool's only workflow worker is busy until the gate opens.
  const held = await client.call<{ taskId: string }>('workflow.run', { dir: blocker, wait: false });
  await workflowItem(client, held.taskId, 'running');
  return { client, gate, target, twin, blockerTaskId: held.taskId };
}

const runTarget = (client: GatewayClient, dir: string, extra: Record<string, unknown> = {}) =>
  client.call<{ taskId: string; result?: { status: string; error?: { code: string } } }>(
    'workflow.run',
    { dir, input: { text: 'hi' }, ...extra },
    { timeoutMs: 10_000 },
  );

describe('workflow runs whose work item ends before a worker claims it', () => {
  it('a work item cancelled while queued ends its run cancelled and frees the workflow slot', async () => {
    const { client, gate, target } = await setup();
    const { taskId } = await runTarget(client, target, { wait: false });
    const item = await workflowItem(client, taskId, 'queued');
    await client.call('work.cancel', { id: item.id });

    const task = await concluded(client, taskId);
    expect(task).toMatchObject({ state: 'cancelled', status: 'failure', error: { code: 'ABORTED' } });
    expect(task.error?.message).toContain(item.id);

    // max_concurrency is 1: the cancelled run gave its slot back, so the next run starts and ends.
    gate.open();
    const again = await runTarget(client, target);
    expect(again.result).toMatchObject({ status: 'success' });
  });

  it('workflow.cancel of a run waiting on the queue cancels its work item', async () => {
    const { client, gate, target } = await setup();
    const { taskId } = await runTarget(client, target, { wait: false });
    const item = await workflowItem(client, taskId, 'queued');
    expect(await client.call('workflow.cancel', { taskId })).toEqual({ taskId, cancelled: true });

    // Ended now, while the pool's only worker is still busy: not only once a worker claims the item.
    expect((await workflowItem(client, taskId, 'cancelled')).id).toBe(item.id);
    const task = await concluded(client, taskId);
    expect(task).toMatchObject({ state: 'cancelled', status: 'failure', error: { code: 'ABORTED' } });

    gate.open();
    const again = await runTarget(client, target);
    expect(again.result).toMatchObject({ status: 'success' });
  });

  it('refuses a run whose task id another workflow already has waiting, and runs the first', async () => {
    const { client, gate, target, twin } = await setup();
    const first = runTarget(client, target, { taskId: 'shared-id' });
    await workflowItem(client, 'shared-id', 'queued');

    const second = await runTarget(client, twin, { taskId: 'shared-id' });
    expect(second.result).toMatchObject({ status: 'failure', error: { code: 'CONFLICT' } });

    gate.open();
    expect((await first).result).toMatchObject({ status: 'success' });
    const { items } = await client.call<{ items: Item[] }>('work.list', { kind: 'workflow.run' });
    expect(
      items.filter((candidate) => candidate.params.taskId === 'shared-id').map((entry) => entry.state),
    ).toEqual(['completed']);
  });
});

/**
 * `held`: start → wait → after → done, one run at a time (`max_concurrency: 1`) on the pool's only workflow
 * worker. A run whose input says `block` stays in `wait` until the node's signal aborts.
 */
const heldToolsMjs = `
const probe = () => globalThis.__agentdRunProbe;
export const waitForAbort = (input, context) => {
  if (!context.spec.input?.block) return input;
  probe().blocked.push(context.taskId);
  return new Promise((resolve, reject) => {
    probe().release.promise.then(() => resolve(input));
    const stop = () => {
      probe().aborted.push(context.taskId);
      reject(new Error('stopped by its signal'));
    };
    if (context.signal.aborted) stop();
    else context.signal.addEventListener('abort', stop, { once: true });
  });
};
export const mark = (input, context) => {
  probe().after.push(context.taskId);
  return input;
};
`;

function writeHeldFlow(dir: string): string {
  return writeWorkflow(
    {
      'workflow.yaml': workflowYaml(
        [
          node('start', 'start'),
          node('wait', 'linear', { tools: ['waitForAbort'] }),
          node('after', 'linear', { tools: ['mark'] }),
          node('done', 'exit'),
        ],
        [edge('start', 'wait'), edge('wait', 'after'), edge('after', 'done')],
        { id: 'held' },
      ),
      'tools.yaml': {
        tools: [
          { id: 'waitForAbort', entrypoint: './tools.mjs#waitForAbort' },
          { id: 'mark', entrypoint: './tools.mjs#mark' },
        ],
      },
      'tools.mjs': heldToolsMjs,
      'scheduler.yaml': {
        scheduler: { enabled: true, max_concurrency: 1, queue_policy: 'fifo', max_queue_size: 20 },
      },
    },
    dir,
  );
}

describe('workflow runs whose work item ends while a worker runs it', () => {
  async function setupHeld() {
    const home = tempHome('agentd-wf-running-');
    writeFileSync(join(home, 'agentd.yaml'), stringify({ workers: { workflow_concurrency: 1 } }));
    const flow = writeHeldFlow(join(home, 'workflow-library', 'held'));
    const started = await startRuntime({ home });
    const client = await started.connect();
    cleanup.push(
      () => started.runtime.close(),
      () => client.close(),
    );
    const probe: RunProbe = { blocked: [], aborted: [], after: [], release: newGate() };
    gates.__agentdRunProbe = probe;
    /** Starts a blocking run and waits until a worker runs it and its `wait` node blocks. */
    const startBlocked = async () => {
      const { taskId } = await client.call<{ taskId: string }>('workflow.run', {
        dir: flow,
        input: { block: true },
        wait: false,
      });
      const item = await workflowItem(client, taskId, 'running');
      await until(`the wait node of ${taskId}`, async () =>
        probe.blocked.includes(taskId) ? true : undefined,
      );
      return { taskId, item };
    };
    const runThrough = () =>
      client.call<{ taskId: string; result?: { status: string } }>(
        'workflow.run',
        { dir: flow, input: { block: false } },
        { timeoutMs: 10_000 },
      );
    const itemState = async (id: string) =>
      (await client.call<{ item: Item }>('work.get', { id, ledgerLast: 1 })).item.state;
    return { started, client, probe, startBlocked, runThrough, itemState };
  }

  it('work.cancel cancels the run, aborts its node, starts no further node and frees the slot', async () => {
    const { client, probe, startBlocked, runThrough, itemState } = await setupHeld();
    const { taskId, item } = await startBlocked();
    await client.call('work.cancel', { id: item.id });

    const task = await concluded(client, taskId);
    expect(task).toMatchObject({ state: 'cancelled', status: 'failure', error: { code: 'ABORTED' } });
    expect(probe.aborted).toEqual([taskId]);

    // max_concurrency 1 and one workflow worker: the next run goes through only once the cancelled run gave
    // back its scheduler slot and its worker let go of the item.
    const again = await runThrough();
    expect(again.result).toMatchObject({ status: 'success' });
    expect(probe.after).toEqual([again.taskId]);
    expect(await itemState(item.id)).toBe('cancelled');
  });

  it('pausing the item cancels the run; the item, resumed, fails as it has no run any more', async () => {
    const { started, client, probe, startBlocked, runThrough, itemState } = await setupHeld();
    const pool = started.runtime.work.pool!;
    const { taskId, item } = await startBlocked();
    await pool.pause({ ids: [item.id] });

    const task = await concluded(client, taskId);
    expect(task).toMatchObject({ state: 'cancelled', error: { code: 'ABORTED' } });
    expect(probe.aborted).toEqual([taskId]);
    expect(await itemState(item.id)).toBe('paused');

    await pool.resume({ ids: [item.id] });
    const ended = await until('the resumed item to fail', async () => {
      const { item: current } = await client.call<{
        item: Item & { outcome: { error?: { message: string } } | null };
      }>('work.get', { id: item.id, ledgerLast: 1 });
      return current.state === 'failed' || current.state === 'dead' ? current : undefined;
    });
    expect(ended.outcome?.error?.message).toContain('has no run in this agentd process');
    expect((await runThrough()).result).toMatchObject({ status: 'success' });
    expect(probe.after).toHaveLength(1);
  });

  it('stopping the pool cancels the run instead of waiting for its node, and hands the item back', async () => {
    const { started, client, probe, startBlocked, itemState } = await setupHeld();
    const { taskId, item } = await startBlocked();

    const stopped = started.runtime.work.pool!.stop().then(() => 'stopped' as const);
    const timeout = new Promise<'timed out'>((resolve) => setTimeout(() => resolve('timed out'), 5_000));
    expect(await Promise.race([stopped, timeout])).toBe('stopped');
    expect(probe.aborted).toEqual([taskId]);
    expect(probe.after).toEqual([]);
    expect(await concluded(client, taskId)).toMatchObject({ state: 'cancelled', error: { code: 'ABORTED' } });
    expect(await itemState(item.id)).toBe('queued');
  });
});
