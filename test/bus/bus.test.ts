import { describe, expect, it } from 'vitest';
import { createBus } from '../../src/bus/index.js';
import { createRecordingLogger } from '../../src/util/index.js';

describe('bus', () => {
  it('delivers in publish order with increasing seq and scope', () => {
    const bus = createBus();
    const seen: Array<[string, number, string | undefined]> = [];
    bus.subscribe({}, (event) => seen.push([event.type, event.seq, event.sessionKey]));
    bus.publish('system:error', { code: 'X', message: 'one', component: 'test' }, { sessionKey: 's1' });
    bus.publish('store:degraded', { reason: 'two' });
    expect(seen).toEqual([
      ['system:error', 1, 's1'],
      ['store:degraded', 2, undefined],
    ]);
  });

  it('isolates a throwing subscriber and logs it', () => {
    const logger = createRecordingLogger();
    const bus = createBus({ logger });
    const received: string[] = [];
    bus.subscribe({}, () => {
      throw new Error('boom');
    });
    bus.subscribe({}, (event) => received.push(event.type));
    expect(() => bus.publish('store:degraded', { reason: 'x' })).not.toThrow();
    expect(received).toEqual(['store:degraded']);
    expect(logger.records.some((record) => record.level === 'error')).toBe(true);
  });

  it('filters by type, prefix, session, agent, work item and run', () => {
    const bus = createBus();
    const bySession: number[] = [];
    const byPrefix: string[] = [];
    const byWork: number[] = [];
    bus.subscribe({ sessionKey: 'a' }, (event) => bySession.push(event.seq));
    bus.subscribe({ types: ['run:*'] }, (event) => byPrefix.push(event.type));
    bus.subscribe({ workItemId: 'w1', agentId: 'main' }, (event) => byWork.push(event.seq));
    bus.publish('store:degraded', { reason: 'x' }, { sessionKey: 'a' });
    bus.publish('store:degraded', { reason: 'x' }, { sessionKey: 'b', workItemId: 'w1', agentId: 'main' });
    bus.publish('run:text-delta', { runId: 'r', delta: 'h', text: 'h' }, { runId: 'r', workItemId: 'w1' });
    expect(bySession).toEqual([1]);
    expect(byPrefix).toEqual(['run:text-delta']);
    expect(byWork).toEqual([2]);
  });

  it('unsubscribes, also from inside a handler, without disturbing delivery', () => {
    const bus = createBus();
    const calls: string[] = [];
    const off = bus.subscribe({}, () => {
      calls.push('first');
      off();
    });
    bus.subscribe({}, () => calls.push('second'));
    bus.publish('store:degraded', { reason: 'x' });
    bus.publish('store:degraded', { reason: 'y' });
    expect(calls).toEqual(['first', 'second', 'second']);
    expect(bus.subscriberCount).toBe(1);
  });

  it('types single-event subscriptions', () => {
    const bus = createBus();
    const reasons: string[] = [];
    bus.on('store:degraded', (event) => reasons.push(event.data.reason));
    bus.publish('system:error', { code: 'A', message: 'b', component: 'c' });
    bus.publish('store:degraded', { reason: 'disk' });
    expect(reasons).toEqual(['disk']);
  });
});
