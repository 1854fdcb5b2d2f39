import { describe, expect, it } from 'vitest';
import { newRecord, refFor, remember, settle, touchSession } from '../../../src/chat/service/records.js';
import { LazyAbortController } from '../../../src/util/index.js';
import { fakeContext } from './context.js';

describe('chat step: records', () => {
  it('starts a record running at the clock time', () => {
    const { ctx, clock } = fakeContext();
    clock.advance(500);
    expect(newRecord(ctx, 'run-1', 'agent:main:main', 'main')).toEqual({
      runId: 'run-1',
      sessionKey: 'agent:main:main',
      agentId: 'main',
      status: 'running',
      text: '',
      startedAt: 1_500,
    });
  });

  it('remembers at most maxRememberedRuns finished runs, forgetting the oldest', () => {
    const { ctx } = fakeContext();
    for (const runId of ['a', 'b', 'c']) remember(ctx, newRecord(ctx, runId, 's', 'main'));
    expect([...ctx.finished.keys()]).toEqual(['b', 'c']);
  });

  it('settles a live run: leaves live, is remembered and wakes its waiters once', () => {
    const { ctx } = fakeContext();
    const record = newRecord(ctx, 'run-1', 's', 'main');
    ctx.live.set('run-1', { record, controller: new LazyAbortController(), done: Promise.resolve(record) });
    const woken: string[] = [];
    ctx.waiters.set('run-1', [(r) => woken.push(`first:${r.runId}`), (r) => woken.push(`second:${r.runId}`)]);
    settle(ctx, record);
    expect(ctx.live.has('run-1')).toBe(false);
    expect(ctx.finished.get('run-1')).toBe(record);
    expect(woken).toEqual(['first:run-1', 'second:run-1']);
    expect(ctx.waiters.has('run-1')).toBe(false);
  });

  it('does not fail a turn when the session record cannot be touched', async () => {
    const { ctx, calls } = fakeContext({ touchFails: true });
    await expect(touchSession(ctx, 'session-1', 2)).resolves.toBeUndefined();
    expect(calls).toEqual([['sessions.touch', 'session-1', { messageDelta: 2, at: 1_000 }]]);
  });

  it('resolves the session ref of the active session', async () => {
    const { ctx } = fakeContext();
    await expect(refFor(ctx, 'agent:main:main', 'main')).resolves.toEqual({
      sessionId: 'session-of-agent:main:main',
      sessionKey: 'agent:main:main',
      agentId: 'main',
    });
  });
});
