import { describe, expect, it } from 'vitest';
import { type Bus, createBus } from '../../src/bus/index.js';
import { createLedger } from '../../src/ledger/index.js';
import type { ToolContext, ToolDefinition } from '../../src/tools/index.js';
import { createManualClock, createSequentialIdGenerator, silentLogger } from '../../src/util/index.js';
import {
  buildAwarenessDigest,
  createChildWorkTools,
  createWorkQueue,
  type WorkQueue,
} from '../../src/work/index.js';
import { describeEachDatabase } from '../helpers/databases.js';

function contextFor(
  bus: Bus,
  workItemId: string | undefined,
  signal = new AbortController().signal,
): ToolContext {
  return {
    runId: 'run_1',
    agentId: 'main',
    toolCallId: 'call_1',
    workspaceDir: '/tmp',
    signal,
    bus,
    logger: silentLogger,
    ...(workItemId ? { workItemId } : {}),
  };
}

async function call(tool: ToolDefinition, args: unknown, context: ToolContext): Promise<any> {
  const parsed = tool.input.parse(args);
  const result = await tool.execute(parsed, context);
  return JSON.parse(typeof result === 'string' ? result : result.content);
}

async function runningParent(queue: WorkQueue, workerId = 'w-parent') {
  const { id } = await queue.submit({ kind: 'task', agentId: 'main', description: 'parent', priority: 3 });
  await queue.claim(workerId);
  await queue.start(id, workerId);
  return id;
}

async function finish(queue: WorkQueue, kind: string, summary: string) {
  const item = await queue.claim('w-child', { kinds: [kind] });
  await queue.start(item!.id, 'w-child');
  return queue.complete(item!.id, 'w-child', { data: { summary } });
}

describeEachDatabase('child work tools', (getDb) => {
  const setup = (config: Record<string, number> = {}) => {
    const clock = createManualClock();
    const bus = createBus({ clock });
    let getManyCalls = 0;
    const base = createWorkQueue({
      db: getDb(),
      bus,
      clock,
      idGenerator: createSequentialIdGenerator(),
      config,
    });
    const queue: WorkQueue = Object.assign(Object.create(base), {
      getMany: (ids: ReadonlyArray<string>) => {
        getManyCalls++;
        return base.getMany(ids);
      },
    });
    const ledger = createLedger({ db: getDb(), clock });
    const [spawn, awaitTool, check] = createChildWorkTools({ queue, bus, ledger });
    return {
      clock,
      bus,
      queue,
      ledger,
      spawn: spawn!,
      awaitTool: awaitTool!,
      check: check!,
      getManyCalls: () => getManyCalls,
    };
  };

  it('spawns at once with inherited priority, session and agent, and re-spawning returns the same child', async () => {
    const { queue, bus, spawn } = setup();
    const parentId = await runningParent(queue);
    const first = await call(
      spawn,
      { kind: 'research', description: 'find sources' },
      contextFor(bus, parentId),
    );
    expect(first).toMatchObject({ state: 'queued', existing: false });
    expect(await queue.get(first.id)).toMatchObject({ parentId, priority: 3, agentId: 'main', depth: 1 });
    const again = await call(
      spawn,
      { kind: 'research', description: 'find sources' },
      contextFor(bus, parentId),
    );
    expect(again).toMatchObject({ id: first.id, existing: true });
    const byAgent = await call(
      spawn,
      { agent: 'helper', description: 'other', priority: 9 },
      contextFor(bus, parentId),
    );
    expect(await queue.get(byAgent.id)).toMatchObject({ kind: 'task', agentId: 'helper', priority: 9 });
  });

  it('with neither agent nor kind, the child goes to the parent agent as a task', async () => {
    const { queue, bus, spawn } = setup();
    expect(spawn.input.safeParse({ description: 'd' }).success).toBe(true);
    const parentId = await runningParent(queue);
    const child = await call(spawn, { description: 'look it up' }, contextFor(bus, parentId));
    expect(await queue.get(child.id)).toMatchObject({ kind: 'task', agentId: 'main', parentId });
  });

  it('refuses without a work item, without a description, and past the limits', async () => {
    const { queue, bus, spawn } = setup({ maxChildren: 1 });
    await expect(
      spawn.execute({ kind: 'x', description: 'd' }, contextFor(bus, undefined)),
    ).rejects.toMatchObject({
      code: 'INVALID_REQUEST',
    });
    expect(spawn.input.safeParse({ kind: 'x' }).success).toBe(false);
    const parentId = await runningParent(queue);
    await call(spawn, { kind: 'x', description: 'one' }, contextFor(bus, parentId));
    await expect(
      spawn.execute({ kind: 'x', description: 'two' }, contextFor(bus, parentId)),
    ).rejects.toMatchObject({
      code: 'FAN_OUT_LIMIT',
    });
  });

  it('await_child_work wakes on completion events and returns outcomes and ledgers', async () => {
    const { queue, bus, spawn, awaitTool, ledger, getManyCalls } = setup();
    const parentId = await runningParent(queue);
    const a = await call(spawn, { kind: 'child-a', description: 'a' }, contextFor(bus, parentId));
    const b = await call(spawn, { kind: 'child-b', description: 'b' }, contextFor(bus, parentId));
    await ledger.append(a.id, { entryType: 'finding', content: 'a found something' });
    const waiting = call(awaitTool, { ids: [a.id, b.id], timeoutSeconds: 600 }, contextFor(bus, parentId));
    // The wait is recorded on the parent so a restart can resume it.
    await new Promise<void>((resolve) => {
      const off = bus.on('work:waiting', () => {
        off();
        resolve();
      });
    });
    expect((await queue.get(parentId))?.waitingOn).toEqual([a.id, b.id]);
    const callsBefore = getManyCalls();
    await finish(queue, 'child-a', 'did a');
    await finish(queue, 'child-b', 'did b');
    const result = await waiting;
    expect(result.children.map((child: any) => [child.id, child.state, child.outcome.data.summary])).toEqual([
      [a.id, 'completed', 'did a'],
      [b.id, 'completed', 'did b'],
    ]);
    expect(result.children[0].ledger).toBe('[1] finding: a found something');
    // One re-check per completion event plus the final read: no polling loop.
    expect(getManyCalls() - callsBefore).toBeLessThanOrEqual(3);
    expect((await queue.get(parentId))?.waitingOn).toBeNull();
  });

  it('await_child_work times out with CHILD_WORK_TIMEOUT naming the unfinished children', async () => {
    const { queue, bus, spawn, awaitTool } = setup();
    const parentId = await runningParent(queue);
    const a = await call(spawn, { kind: 'child', description: 'a' }, contextFor(bus, parentId));
    await expect(
      awaitTool.execute({ ids: [a.id], timeoutSeconds: 0.05 }, contextFor(bus, parentId)),
    ).rejects.toMatchObject({
      code: 'CHILD_WORK_TIMEOUT',
      message: expect.stringContaining(`${a.id} (queued)`),
    });
  });

  it('await_child_work refuses ids that are not children of the current item', async () => {
    const { queue, bus, awaitTool } = setup();
    const parentId = await runningParent(queue);
    const stranger = await queue.submit({ kind: 'task', description: 'unrelated' });
    await expect(
      awaitTool.execute({ ids: [stranger.id], timeoutSeconds: 1 }, contextFor(bus, parentId)),
    ).rejects.toMatchObject({
      code: 'NOT_FOUND',
    });
  });

  it('check_child_work reports states, finished outcomes and the latest ledger entries of running children', async () => {
    const { queue, bus, spawn, check, ledger } = setup();
    const parentId = await runningParent(queue);
    const a = await call(spawn, { kind: 'child-a', description: 'a' }, contextFor(bus, parentId));
    const b = await call(spawn, { kind: 'child-b', description: 'b' }, contextFor(bus, parentId));
    await finish(queue, 'child-a', 'did a');
    const running = await queue.claim('w', { kinds: ['child-b'] });
    await queue.start(running!.id, 'w');
    for (let index = 1; index <= 7; index++)
      await ledger.append(b.id, { entryType: 'step', content: `step ${index}` });
    const result = await call(check, { ids: [a.id, b.id] }, contextFor(bus, parentId));
    expect(result.children[0]).toMatchObject({
      id: a.id,
      state: 'completed',
      outcome: { data: { summary: 'did a' } },
    });
    expect(result.children[1].state).toBe('running');
    expect(result.children[1].outcome).toBeUndefined();
    expect(result.children[1].ledger.split('\n')).toHaveLength(5);
    expect(result.children[1].ledger).toContain('step 7');
  });
});

describeEachDatabase('awareness digest', (getDb) => {
  it('lists running siblings with their plan, recent completions with summaries, findings and own children', async () => {
    const clock = createManualClock();
    const queue = createWorkQueue({ db: getDb(), clock, idGenerator: createSequentialIdGenerator() });
    const ledger = createLedger({ db: getDb(), clock });
    const sibling = await queue.submit({
      kind: 'research',
      agentId: 'scout',
      title: 'Survey competitors',
      description: 'x',
    });
    await queue.claim('w1');
    await queue.start(sibling.id, 'w1');
    await ledger.append(sibling.id, { entryType: 'plan', content: 'old plan' });
    await ledger.append(sibling.id, { entryType: 'plan', content: 'read three vendor sites' });
    await ledger.append(sibling.id, { entryType: 'finding', content: 'vendor B has no API' });

    const done = await queue.submit({ kind: 'write', title: 'Draft intro', description: 'x' });
    await queue.claim('w2');
    await queue.start(done.id, 'w2');
    await queue.complete(done.id, 'w2', { data: { summary: 'intro drafted, 200 words' } });

    clock.advance(2 * 24 * 60 * 60 * 1000);
    const recent = await queue.submit({ kind: 'write', title: 'Draft outro', description: 'x' });
    await queue.claim('w3');
    await queue.start(recent.id, 'w3');
    await queue.complete(recent.id, 'w3', { data: { summary: 'outro drafted' } });

    const self = await queue.submit({ kind: 'task', title: 'Me', description: 'x' });
    await queue.claim('w4');
    await queue.start(self.id, 'w4');
    const child = await queue.submit({
      kind: 'task',
      title: 'My child',
      description: 'x',
      parentId: self.id,
    });

    const digest = await buildAwarenessDigest({
      workItem: (await queue.get(self.id))!,
      queue,
      ledger,
      now: clock.now(),
      lookbackMs: 24 * 60 * 60 * 1000,
    });
    expect(digest.startsWith('== AWARENESS ==')).toBe(true);
    expect(digest).toContain('Currently active:');
    expect(digest).toContain('Survey competitors');
    expect(digest).toContain('plan: read three vendor sites');
    expect(digest).not.toContain('old plan');
    expect(digest).toContain('Draft outro');
    expect(digest).toContain('outro drafted');
    // Outside the lookback window.
    expect(digest).not.toContain('Draft intro');
    // The finding was written two days ago, so it is outside the window too.
    expect(digest).not.toContain('vendor B has no API');
    expect(digest).toContain(`My child (${child.id}): queued`);
    expect(digest).not.toMatch(/\] Me \(/);
  });

  it('includes recent findings and stays within the token budget, marking what it cut', async () => {
    const clock = createManualClock();
    const queue = createWorkQueue({ db: getDb(), clock, idGenerator: createSequentialIdGenerator() });
    const ledger = createLedger({ db: getDb(), clock });
    const self = await queue.submit({ kind: 'task', description: 'me' });
    for (let index = 0; index < 30; index++) {
      const { id } = await queue.submit({ kind: 'research', title: `Item ${index}`, description: 'x' });
      await ledger.append(id, { entryType: 'finding', content: `finding number ${index} `.repeat(12) });
    }
    const digest = await buildAwarenessDigest({
      workItem: (await queue.get(self.id))!,
      queue,
      ledger,
      now: clock.now(),
      maxTokens: 300,
      limits: { maxRecentFindings: 30 },
    });
    expect(digest).toContain('Recent findings:');
    expect(digest.length).toBeLessThanOrEqual(300 * 4);
    expect(digest).toMatch(/… \d+ more/);
  });

  it('is empty when there is nothing to report', async () => {
    const queue = createWorkQueue({ db: getDb() });
    const { id } = await queue.submit({ kind: 'task', description: 'alone' });
    expect(await buildAwarenessDigest({ workItem: (await queue.get(id))!, queue })).toBe('');
  });
});

describe('child work tool definitions', () => {
  it('exposes exactly the three seed 002 tools', () => {
    const tools = createChildWorkTools({ queue: {} as WorkQueue, bus: createBus() });
    expect(tools.map((tool) => tool.name)).toEqual([
      'spawn_child_work',
      'await_child_work',
      'check_child_work',
    ]);
  });
});
