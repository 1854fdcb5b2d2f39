import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import { appendBatch } from '../../../src/memory/service/ram.js';
import { history } from '../../../src/memory/service/recall.js';
import {
  enterDegraded,
  pendingCount,
  readWithFallback,
  retryWrites,
} from '../../../src/memory/service/write-retry.js';
import { describeEachDatabase } from '../../helpers/databases.js';
import { sessionRef } from '../memory-fixtures.js';
import { breakableDatabase, stepContext } from './helpers.js';

describeEachDatabase('memory write-retry queue', (getDb) => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('queues commits while the database fails and writes them through, in order, when it is back', async () => {
    const db = breakableDatabase(getDb());
    const { ctx, types } = stepContext(db, { config: { writeRetryMs: 100, maxWriteRetryMs: 400 } });
    const ref = sessionRef();
    await appendBatch(ctx, ref, [{ role: 'user', content: 'before' }]);
    db.broken = true;
    const during = await appendBatch(ctx, ref, [
      { role: 'user', content: 'during one' },
      { role: 'assistant', content: 'during two' },
    ]);
    expect(during.map((entry) => entry.memoryId)).toEqual([2, 3]);
    expect(ctx.writes.degradedReason).toBe('disk I/O error');
    expect(pendingCount(ctx)).toBe(1);
    expect(types()).toEqual(['memory:degraded', 'system:error']);
    // Still broken: the retry fails and backs off (100 → 200 → 400, capped).
    await vi.advanceTimersByTimeAsync(100);
    expect(ctx.writes.retry.delayMs).toBe(400);
    db.broken = false;
    await vi.advanceTimersByTimeAsync(400);
    await vi.waitFor(() => expect(ctx.writes.degradedReason).toBeUndefined(), { timeout: 10_000 });
    expect(pendingCount(ctx)).toBe(0);
    expect(ctx.writes.retry.delayMs).toBe(100);
    expect(types().at(-1)).toBe('memory:recovered');
    const stored = await history(ctx, ref.sessionKey);
    expect(stored.map((entry) => entry.content)).toEqual(['before', 'during one', 'during two']);
  });

  it('answers a failed read from RAM and recovers on the next retry without anything queued', async () => {
    const db = breakableDatabase(getDb());
    const { ctx, types } = stepContext(db);
    db.broken = true;
    const answer = await readWithFallback(
      ctx,
      async () => {
        await db.get('SELECT 1 AS ok');
        return 'from the database';
      },
      () => 'from RAM',
    );
    expect(answer).toBe('from RAM');
    expect(ctx.writes.degradedReason).toBeDefined();
    db.broken = false;
    await retryWrites(ctx);
    expect(ctx.writes.degradedReason).toBeUndefined();
    expect(types()).toEqual(['memory:degraded', 'system:error', 'memory:recovered']);
  });

  it('says it is degraded once, however many failures follow', async () => {
    const { ctx, types } = stepContext(getDb());
    enterDegraded(ctx, new Error('first'));
    enterDegraded(ctx, new Error('second'));
    expect(ctx.writes.degradedReason).toBe('first');
    expect(types()).toEqual(['memory:degraded', 'system:error']);
    await retryWrites(ctx);
    expect(ctx.writes.degradedReason).toBeUndefined();
  });
});
