import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  createHeartbeat,
  formatWait,
  type Heartbeat,
  stripHeartbeatOk,
  withinActiveHours,
} from '../../src/agents/index.js';
import { type Bus, type BusEvent, createBus } from '../../src/bus/index.js';
import type { SqlDatabase } from '../../src/store/index.js';
import { createScriptedModel } from '../../src/testing.js';
import { createWorkQueue, type WorkQueue } from '../../src/work/index.js';
import { openTestDatabase } from '../helpers/databases.js';

let db: SqlDatabase;
let bus: Bus;
let queue: WorkQueue;
let heartbeat: Heartbeat | undefined;
let events: BusEvent[];

const minute = 60_000;

beforeEach(async () => {
  db = await openTestDatabase('sqlite');
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
  vi.setSystemTime(new Date('2026-03-02T10:00:00Z'));
  bus = createBus();
  events = [];
  bus.subscribe({ types: ['agent:*'] }, (event) => events.push(event));
  queue = createWorkQueue({ db, bus, config: { leaseMs: 60 * minute } });
});
afterEach(async () => {
  await heartbeat?.stop();
  heartbeat = undefined;
  vi.useRealTimers();
  await queue.close();
  await db.close();
});

const ofType = (type: string) =>
  events.filter((event) => event.type === type).map((event) => event.data as any);

describe('heartbeat sweep', () => {
  it('detects a blocked task on its interval, reports it once and proposes a paused speculative task with rationale', async () => {
    const { id } = await queue.submit({
      kind: 'task',
      agentId: 'main',
      title: 'Deploy the site',
      description: 'x',
      sessionKey: 's1',
    });
    await queue.block(id, { reason: 'needs the hosting API key' });
    heartbeat = createHeartbeat({ queue, bus, config: { sweepIntervalMs: 5_000 } });
    heartbeat.start();
    await vi.advanceTimersByTimeAsync(4_999);
    expect(ofType('agent:blocked')).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(1);
    const [blocked] = ofType('agent:blocked');
    expect(blocked).toMatchObject({
      agentId: 'main',
      workItemId: id,
      condition: 'blocked',
      reason: 'needs the hosting API key',
    });
    expect(blocked.proposals).toHaveLength(1);
    expect(blocked.proposals[0].rationale).toContain('needs the hosting API key');
    const proposal = await queue.get(blocked.proposals[0].workItemId);
    expect(proposal).toMatchObject({ speculative: true, state: 'paused', sessionKey: 's1', agentId: 'main' });
    expect(proposal?.rationale).toContain('read-only');
    expect(ofType('agent:heartbeat')[0]).toMatchObject({
      agentId: 'main',
      kind: 'sweep',
      counts: { blocked: 1 },
    });

    // Later sweeps do not report the same block again or duplicate the proposal.
    await vi.advanceTimersByTimeAsync(20_000);
    expect(ofType('agent:blocked')).toHaveLength(1);
    expect(await queue.list({ speculative: true })).toHaveLength(1);
    // Nobody claims a speculative proposal until it is approved (resumed).
    expect(await queue.claim('w')).toBeUndefined();
  });

  it('auto-runs speculative proposals when the agent policy allows it', async () => {
    const { id } = await queue.submit({ kind: 'task', agentId: 'bold', description: 'x' });
    await queue.block(id, { reason: 'waiting for review' });
    heartbeat = createHeartbeat({
      queue,
      bus,
      policy: (agentId) => ({ autoRunSpeculative: agentId === 'bold' }),
    });
    const result = await heartbeat.sweep();
    expect(result.blocked).toEqual([id]);
    const proposal = await queue.get(result.proposals[0]!);
    expect(proposal).toMatchObject({ state: 'queued', speculative: true });
  });

  it('reports stalled work: running too long, or ready but never started', async () => {
    heartbeat = createHeartbeat({
      queue,
      bus,
      config: { sweepIntervalMs: minute, stallAfterMs: 10 * minute },
    });
    const running = await queue.submit({
      kind: 'task',
      agentId: 'main',
      title: 'Long job',
      description: 'x',
    });
    await queue.claim('w');
    await queue.start(running.id, 'w');
    const waiting = await queue.submit({
      kind: 'task',
      agentId: 'main',
      title: 'Ignored job',
      description: 'x',
    });
    heartbeat.start();
    await vi.advanceTimersByTimeAsync(9 * minute);
    expect(ofType('agent:blocked')).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(minute);
    const stalled = ofType('agent:blocked');
    expect(stalled.map((event) => [event.workItemId, event.condition])).toEqual([
      [running.id, 'stalled'],
      [waiting.id, 'stalled'],
    ]);
    expect(stalled[0].proposals[0].title).toContain('Review the progress of "Long job"');
    expect(stalled[1].proposals[0].title).toContain('has not started');
    expect(stalled[0].reason).toBe('running for 10 min');
    expect(stalled[1].reason).toBe('ready but not started for 10 min');
  });

  it('says how long an item really waited, not a minute when it was seconds', async () => {
    heartbeat = createHeartbeat({ queue, bus, config: { sweepIntervalMs: 100, stallAfterMs: 1_000 } });
    const waiting = await queue.submit({
      kind: 'task',
      agentId: 'main',
      title: 'Quick job',
      description: 'x',
    });
    await vi.advanceTimersByTimeAsync(1_900);
    await heartbeat.sweep();
    const [stalled] = ofType('agent:blocked');
    expect(stalled).toMatchObject({ workItemId: waiting.id, reason: 'ready but not started for 1.9 s' });
    expect(stalled.proposals[0].rationale).toContain('1.9 s');
  });

  it('never reports system work as stalled, so it gets no proposals', async () => {
    heartbeat = createHeartbeat({
      queue,
      bus,
      config: { sweepIntervalMs: 100, stallAfterMs: 1_000 },
      systemKinds: ['memory.maintain'],
    });
    await queue.submit({ kind: 'memory.maintain', agentId: 'system', title: 'memory maintenance' });
    await vi.advanceTimersByTimeAsync(5_000);
    const result = await heartbeat.sweep();
    expect(result.stalled).toEqual([]);
    expect(result.proposals).toEqual([]);
    expect(ofType('agent:blocked')).toEqual([]);
  });

  it('formats waits in seconds, minutes and hours', () => {
    expect(formatWait(1_900)).toBe('1.9 s');
    expect(formatWait(42_400)).toBe('42 s');
    expect(formatWait(15 * minute + 59_000)).toBe('15 min');
    expect(formatWait(125 * minute)).toBe('2 h 5 min');
    expect(formatWait(120 * minute)).toBe('2 h');
  });
});

describe('model-driven heartbeat', () => {
  it('suppresses HEARTBEAT_OK, skips when nothing changed, and nudges when the model has something to say', async () => {
    const model = createScriptedModel({
      steps: [
        { text: 'HEARTBEAT_OK' },
        { text: 'The deploy task is blocked on a missing API key; please add it.' },
      ],
    });
    const nudges: string[] = [];
    heartbeat = createHeartbeat({
      queue,
      bus,
      model,
      heartbeatChecklist: '- Tell me about blocked tasks',
      agents: () => ['main'],
      config: { sweepIntervalMs: minute, modelIntervalMs: 30 * minute },
      onNudge: (agentId, message) => nudges.push(`${agentId}: ${message}`),
    });
    heartbeat.start();
    await vi.advanceTimersByTimeAsync(29 * minute);
    expect(model.requests).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(minute);
    expect(model.requests).toHaveLength(1);
    expect(model.requests[0]!.metadata).toMatchObject({ purpose: 'heartbeat', sessionKey: 'heartbeat:main' });
    expect(model.requests[0]!.messages[0]!.content).toContain('Tell me about blocked tasks');
    expect(ofType('agent:heartbeat').filter((event) => event.kind === 'model')).toEqual([
      expect.objectContaining({ skipped: 'ok', agentId: 'main' }),
    ]);
    expect(nudges).toEqual([]);

    // Nothing changed: the next check burns no tokens.
    await vi.advanceTimersByTimeAsync(30 * minute);
    expect(model.requests).toHaveLength(1);
    expect(ofType('agent:heartbeat').at(-1)).toMatchObject({ kind: 'model', skipped: 'unchanged' });

    const { id } = await queue.submit({ kind: 'task', agentId: 'main', title: 'Deploy', description: 'x' });
    await queue.block(id, { reason: 'missing API key' });
    await vi.advanceTimersByTimeAsync(30 * minute);
    expect(model.requests).toHaveLength(2);
    expect(model.requests[1]!.messages[1]!.content).toContain('missing API key');
    expect(nudges).toEqual(['main: The deploy task is blocked on a missing API key; please add it.']);
    expect(ofType('agent:heartbeat').at(-1)).toMatchObject({
      kind: 'model',
      message: expect.stringContaining('API key'),
    });
    model.assertAllConsumed();
  });

  it('never runs during a user-led turn, and runs right after it ends', async () => {
    const model = createScriptedModel({ steps: [{ text: 'Reminder: the report is due.' }] });
    let userTurn = true;
    heartbeat = createHeartbeat({
      queue,
      bus,
      model,
      heartbeatChecklist: 'check',
      agents: () => ['main'],
      isUserTurnActive: () => userTurn,
      config: { sweepIntervalMs: minute, modelIntervalMs: 30 * minute },
    });
    heartbeat.start();
    await vi.advanceTimersByTimeAsync(45 * minute);
    expect(model.requests).toHaveLength(0);
    expect(ofType('agent:heartbeat').filter((event) => event.skipped === 'user-turn')).toHaveLength(1);
    userTurn = false;
    await vi.advanceTimersByTimeAsync(minute);
    expect(model.requests).toHaveLength(1);
  });

  it('does not run outside active hours', async () => {
    const model = createScriptedModel({ steps: [] });
    heartbeat = createHeartbeat({
      queue,
      bus,
      model,
      heartbeatChecklist: 'check',
      agents: () => ['main'],
      config: {
        sweepIntervalMs: minute,
        modelIntervalMs: 30 * minute,
        activeHours: { start: '22:00', end: '06:00', timezone: 'UTC' },
      },
    });
    heartbeat.start();
    await vi.advanceTimersByTimeAsync(30 * minute);
    expect(model.requests).toHaveLength(0);
    expect(ofType('agent:heartbeat').at(-1)).toMatchObject({
      kind: 'model',
      skipped: 'outside-active-hours',
    });
  });
});

describe('heartbeat helpers', () => {
  it('strips HEARTBEAT_OK only at the start or end', () => {
    expect(stripHeartbeatOk('HEARTBEAT_OK', 300)).toEqual({ ok: true, text: '' });
    expect(stripHeartbeatOk('All quiet. HEARTBEAT_OK', 300)).toEqual({ ok: true, text: 'All quiet.' });
    expect(stripHeartbeatOk('Say HEARTBEAT_OK later', 300).ok).toBe(false);
    expect(stripHeartbeatOk(`HEARTBEAT_OK ${'x'.repeat(301)}`, 300).ok).toBe(false);
  });

  it('checks active hours, including windows over midnight', () => {
    const at = (time: string) => Date.parse(`2026-03-02T${time}:00Z`);
    expect(withinActiveHours(at('10:00'), { start: '09:00', end: '17:00', timezone: 'UTC' })).toBe(true);
    expect(withinActiveHours(at('17:00'), { start: '09:00', end: '17:00', timezone: 'UTC' })).toBe(false);
    expect(withinActiveHours(at('23:30'), { start: '22:00', end: '06:00', timezone: 'UTC' })).toBe(true);
    expect(withinActiveHours(at('05:59'), { start: '22:00', end: '06:00', timezone: 'UTC' })).toBe(true);
    expect(withinActiveHours(at('12:00'), { start: '22:00', end: '06:00', timezone: 'UTC' })).toBe(false);
  });
});
