import { describe, expect, it, vi } from 'vitest';
import { createManualClock, silentLogger } from '../../../src/util/index.js';
import { createEmitter } from '../../../src/workflow/engine/emitter.js';
import { createRunState, newTaskRecord, rootSpec } from '../../../src/workflow/engine/run-state.js';
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
