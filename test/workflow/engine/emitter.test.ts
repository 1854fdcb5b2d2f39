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

describe('emitter', () => {
  it('numbers events per run and logs them even when nobody listens', () => {
    const emitter = createEmitter({
      workflowId: 'wf',
      clock: createManualClock(7),
      logger: silentLogger,
      plugins: noPlugins,
      publish: undefined,
      redact: undefined,
    });
    const target = run();
    emitter.emit(target, 'node_started', 'r', 'a', {});
    emitter.emit(target, 'node_completed', 'r', 'a', {});
    expect(target.events.map((event) => [event.eventId, event.timestamp])).toEqual([
      ['r:1', 7],
      ['r:2', 7],
    ]);
    expect(Object.isFrozen(target.events[0]!.metadata)).toBe(true);
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
    const emitter = createEmitter({
      workflowId: 'wf',
      clock: createManualClock(),
      logger: silentLogger,
      plugins: noPlugins,
      publish: undefined,
      redact: undefined,
    });
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

  it('delivers a loose scheduler event without a run log', () => {
    const emitter = createEmitter({
      workflowId: 'wf',
      clock: createManualClock(),
      logger: silentLogger,
      plugins: noPlugins,
      publish: undefined,
      redact: undefined,
    });
    const seen: unknown[] = [];
    emitter.subscribe((event) => seen.push(event));
    emitter.emitLoose('queue_full', 'wft_9', { queueDepth: 3 });
    expect(seen).toEqual([
      expect.objectContaining({ eventId: 'wft_9:q', type: 'queue_full', rootTaskId: 'wft_9' }),
    ]);
  });
});
