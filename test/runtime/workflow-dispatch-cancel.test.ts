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
const gates = globalThis as { __agentdDispatchGate?: Gate };

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
