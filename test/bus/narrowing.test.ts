import { describe, expect, expectTypeOf, it } from 'vitest';
import { type BusEvent, type BusEventMap, createBus } from '../../src/bus/index.js';

describe('BusEvent as a union correlated by type', () => {
  it('narrows data by type in a handler of several exact types, and delivers only those', () => {
    const bus = createBus();
    const seen: string[] = [];
    bus.subscribe({ types: ['run:text-delta', 'run:finished'] }, (event) => {
      expectTypeOf(event).toEqualTypeOf<BusEvent<'run:text-delta' | 'run:finished'>>();
      if (event.type === 'run:text-delta') {
        expectTypeOf(event.data).toEqualTypeOf<BusEventMap['run:text-delta']>();
        seen.push(`delta ${event.data.delta}`);
      } else {
        expectTypeOf(event.data).toEqualTypeOf<BusEventMap['run:finished']>();
        seen.push(`finished ${event.data.status}`);
      }
    });
    bus.publish('run:started', { runId: 'r', agentId: 'main', model: 'local/agentd-local' });
    bus.publish('run:text-delta', { runId: 'r', delta: 'Hi', text: 'Hi' });
    bus.publish('run:finished', {
      runId: 'r',
      status: 'completed',
      text: 'Hi',
      usage: { inputTokens: 1, outputTokens: 1 },
      turns: 1,
    });
    expect(seen).toEqual(['delta Hi', 'finished completed']);
  });

  it('narrows the catch-all union in a switch', () => {
    const bus = createBus();
    const runIds: string[] = [];
    bus.subscribe({}, (event) => {
      expectTypeOf(event).toEqualTypeOf<BusEvent>();
      switch (event.type) {
        case 'run:tool-started':
          expectTypeOf(event.data.toolName).toBeString();
          runIds.push(event.data.runId);
          return;
      }
    });
    bus.publish('run:tool-started', { runId: 'r2', toolCallId: 't', toolName: 'echo', arguments: {} });
    expect(runIds).toEqual(['r2']);
  });
});
