import { describe, expect, it, vi } from 'vitest';
import { createManualClock, silentLogger } from '../../../src/util/index.js';
import { createEmitter } from '../../../src/workflow/engine/emitter.js';
import { createRunState, newTaskRecord, rootSpec } from '../../../src/workflow/engine/run-state.js';
import type { StageRecord } from '../../../src/workflow/task.js';
import type { PluginHost } from '../../../src/workflow/telemetry.js';

const noPlugins: PluginHost = {
  count: 0,
  dispatch: () => {},
  startup: async () => {},
  shutdown: async () => {},
};
const run = () =>
  createRunState(newTaskRecord('wf', 0, { taskId: 'r', rootTaskId: 'r', spec: rootSpec('r', 'x') }), 'start');

/** An emitter with no listener, plugin, bus or redaction, on a manual clock at `nowMs`. */
const quietEmitter = (nowMs?: number) =>
  createEmitter({
    workflowId: 'wf',
    clock: createManualClock(nowMs),
    logger: silentLogger,
    plugins: noPlugins,
    publish: undefined,
    redact: undefined,
  });

describe('emitter', () => {
  it('numbers events per run and logs them even when nobody listens', () => {
    const emitter = quietEmitter(7);
    const target = run();
    emitter.emit(target, 'node_started', 'r', 'a', {});
    emitter.emit(target, 'node_completed', 'r', 'a', {});
    const events = emitter.eventsOf(target);
    expect(events.map((event) => [event.eventId, event.timestamp])).toEqual([
      ['r:1', 7],
      ['r:2', 7],
    ]);
    expect(Object.isFrozen(events[0]!.metadata)).toBe(true);
  });

  it('builds an event nobody received when read, the same as one it delivered', () => {
    const emitter = quietEmitter(7);
    const target = run();
    emitter.emit(target, 'task_queued', 'r', undefined, { queueDepth: 1 });
    const delivered: unknown[] = [];
    const unsubscribe = emitter.subscribe((event) => delivered.push(event));
    emitter.emit(target, 'task_dequeued', 'r', undefined, { queueDepth: 0 }, 9);
    unsubscribe();
    emitter.emit(target, 'task_started', 'r', undefined, { startNodeId: 'start' });
    const events = emitter.eventsOf(target);
    expect(events[1]).toBe(delivered[0]);
    expect(events).toEqual([
      {
        eventId: 'r:1',
        rootTaskId: 'r',
        taskId: 'r',
        stageId: undefined,
        type: 'task_queued',
        timestamp: 7,
        payload: { queueDepth: 1 },
        metadata: { workflowId: 'wf' },
      },
      delivered[0],
      expect.objectContaining({ eventId: 'r:3', type: 'task_started', timestamp: 7 }),
    ]);
    expect(Object.keys(events[0]!)).toEqual(Object.keys(events[1]!));
    expect(events[0]!.metadata).toBe(events[1]!.metadata);
    expect(emitter.countsOf(target)).toEqual({ task_queued: 1, task_dequeued: 1, task_started: 1 });
  });

  it('isolates a throwing listener and still reaches the others and the bus', () => {
    const publish = vi.fn();
    const warn = vi.fn();
    const emitter = createEmitter({
      workflowId: 'wf',
      clock: createManualClock(),
      logger: { ...silentLogger, warn },
      plugins: noPlugins,
      publish,
      redact: (value) => JSON.parse(JSON.stringify(value).replaceAll('s3cret', '[REDACTED]')),
    });
    const seen: string[] = [];
    emitter.subscribe(() => {
      throw new Error('listener bug');
    });
    const unsubscribe = emitter.subscribe((event) => seen.push(String(event.payload.key)));
    emitter.emit(run(), 'node_started', 'r', 'a', { key: 's3cret' });
    expect(seen).toEqual(['[REDACTED]']);
    expect(warn).toHaveBeenCalledOnce();
    expect(publish).toHaveBeenCalledWith(
      'workflow:node-started',
      expect.objectContaining({ workflowId: 'wf', nodeId: 'a', payload: { key: '[REDACTED]' } }),
    );
    unsubscribe();
    emitter.emit(run(), 'node_started', 'r', 'a', { key: 'x' });
    expect(seen).toHaveLength(1);
  });

  it('counts a run\u2019s events by type in order of first occurrence, deferred stage events included', () => {
    const emitter = quietEmitter();
    const target = run();
    const stage = (nodeId: string, failed = false) =>
      ({
        nodeId,
        startedAt: 0,
        completedAt: 0,
        nodeStatus: failed ? 'failure' : 'success',
        ...(failed ? { error: { code: 'E', message: 'm' } } : {}),
      }) as unknown as StageRecord;
    const clone = newTaskRecord('wf', 0, { taskId: 'r-clone-0', rootTaskId: 'r', spec: rootSpec('r', 'x') });
    const started = Object.freeze({});
    emitter.emit(target, 'task_started', 'r', undefined, {});
    // A clone's stage is built at once; the root's stages are deferred.
    const a = stage('a');
    emitter.stage(target, clone, a, false, started);
    emitter.stage(target, clone, a, true, started);
    const b = stage('b');
    emitter.stage(target, target.root, b, false, started);
    emitter.stage(target, target.root, b, true, started);
    const c = stage('c', true);
    emitter.stage(target, target.root, c, false, started);
    emitter.stage(target, target.root, c, true, started);
    emitter.emit(target, 'task_failed', 'r', undefined, {});
    const counts = emitter.countsOf(target);
    expect(Object.entries(counts)).toEqual([
      ['task_started', 1],
      ['node_started', 3],
      ['node_completed', 2],
      ['node_failed', 1],
      ['task_failed', 1],
    ]);
    // The same as counting the events the run reads back as.
    const recount: Record<string, number> = {};
    for (const event of emitter.eventsOf(target)) recount[event.type] = (recount[event.type] ?? 0) + 1;
    expect(Object.entries(recount)).toEqual(Object.entries(counts));
  });

  it('builds deferred stage events in order when other events and a listener come and go between them', () => {
    const emitter = quietEmitter(0);
    const target = run();
    const stage = (nodeId: string, at: number, failed = false) =>
      ({
        nodeId,
        nodeRole: 'linear',
        nodeKind: 'deterministic',
        startedAt: at,
        completedAt: at + 1,
        nodeStatus: failed ? 'failure' : 'success',
        ...(failed ? { error: { code: 'E', message: 'm' } } : {}),
      }) as unknown as StageRecord;
    const started = Object.freeze({ role: 'linear', kind: 'deterministic' });
    const [a, b, c, d] = [stage('a', 10), stage('b', 20), stage('c', 30, true), stage('d', 40)];
    emitter.emit(target, 'task_started', 'r', undefined, {});
    // a: both events deferred, one after the other.
    emitter.stage(target, target.root, a, false, started);
    emitter.stage(target, target.root, a, true, started);
    // b: an event of its own between its start and its end, both deferred.
    emitter.stage(target, target.root, b, false, started);
    emitter.emit(target, 'routing_merge', 'r', 'b', {});
    emitter.stage(target, target.root, b, true, started);
    // c: started while someone listened (built at once), ended after they left (deferred).
    const unsubscribe = emitter.subscribe(() => {});
    emitter.stage(target, target.root, c, false, started);
    unsubscribe();
    emitter.stage(target, target.root, c, true, started);
    // d: deferred again, right after c's end.
    emitter.stage(target, target.root, d, false, started);
    emitter.stage(target, target.root, d, true, started);
    emitter.emit(target, 'task_failed', 'r', undefined, {});

    const events = emitter.eventsOf(target);
    expect(events.map((event) => [event.eventId, event.type, event.stageId, event.timestamp])).toEqual([
      ['r:1', 'task_started', undefined, 0],
      ['r:2', 'node_started', 'a', 10],
      ['r:3', 'node_completed', 'a', 11],
      ['r:4', 'node_started', 'b', 20],
      ['r:5', 'routing_merge', 'b', 0],
      ['r:6', 'node_completed', 'b', 21],
      ['r:7', 'node_started', 'c', 30],
      ['r:8', 'node_failed', 'c', 31],
      ['r:9', 'node_started', 'd', 40],
      ['r:10', 'node_completed', 'd', 41],
      ['r:11', 'task_failed', undefined, 0],
    ]);
    expect(Object.entries(emitter.countsOf(target))).toEqual([
      ['task_started', 1],
      ['node_started', 4],
      ['node_completed', 3],
      ['routing_merge', 1],
      ['node_failed', 1],
      ['task_failed', 1],
    ]);
    // Leaving out the numbers the stage rows stand for keeps the rest in order.
    expect(emitter.eventsBesides(target, [2, 3, 9, 10]).map((event) => event.eventId)).toEqual([
      'r:1',
      'r:4',
      'r:5',
      'r:6',
      'r:7',
      'r:8',
      'r:11',
    ]);
  });

  it('delivers a loose scheduler event without a run log', () => {
    const emitter = quietEmitter();
    const seen: unknown[] = [];
    emitter.subscribe((event) => seen.push(event));
    emitter.emitLoose('queue_full', 'wft_9', { queueDepth: 3 });
    expect(seen).toEqual([
      expect.objectContaining({ eventId: 'wft_9:q', type: 'queue_full', rootTaskId: 'wft_9' }),
    ]);
  });
});
