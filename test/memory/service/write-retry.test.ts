import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import { appendBatch } from '../../../src/memory/service/ram.js';
import { history } from '../../../src/memory/service/recall.js';
import type { AlsoInTransaction } from '../../../src/memory/service/types.js';
import {
  enterDegraded,
  pendingCount,
  readWithFallback,
  retryWrites,
} from '../../../src/memory/service/write-retry.js';
import type { SqlExecutor } from '../../../src/store/index.js';
import { describeEachDatabase } from '../../helpers/databases.js';
import { sessionRef } from '../memory-fixtures.js';
import { breakableDatabase, loaded, sqliteIoError, stepContext } from './helpers.js';

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

  it('answers a read that fails for a defect from RAM without putting memory in degraded mode', async () => {
    const { ctx, types } = stepContext(getDb());
    const answer = await readWithFallback(
      ctx,
      async () => {
        await getDb().get('SELECT missing_column FROM memory_entries LIMIT 1');
        return 'from the database';
      },
      () => 'from RAM',
    );
    expect(answer).toBe('from RAM');
    expect(ctx.writes.degradedReason).toBeUndefined();
    expect(types()).toEqual([]);
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

/** A statement every database refuses whenever it runs: `kv.value` is NOT NULL. */
const violatesConstraint = (tx: SqlExecutor) =>
  tx.run("INSERT INTO kv (namespace, key, value, updated_at) VALUES ('test', 'k', NULL, 1)").then(() => {});

describeEachDatabase('a memory commit that fails for a reason retrying cannot fix', (getDb) => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  const refusals: Array<[string, AlsoInTransaction, object]> = [
    [
      'a constraint violation',
      violatesConstraint,
      { code: expect.stringMatching(/^(SQLITE_CONSTRAINT_NOTNULL|23502)$/) },
    ],
    [
      'a bug that throws',
      () => {
        throw new TypeError("Cannot read properties of undefined (reading 'runId')");
      },
      { name: 'TypeError' },
    ],
  ];
  it.each(refusals)(
    'is refused at once on %s: not queued, memory not degraded, RAM as before',
    async (_, also, thrown) => {
      const { ctx, types } = stepContext(getDb());
      const ref = sessionRef();
      await appendBatch(ctx, ref, [{ role: 'user', content: 'before' }]);
      const ram = await loaded(ctx);
      const nextId = ram.nextId;
      await expect(
        appendBatch(ctx, ref, [{ role: 'assistant', content: 'refused' }], also),
      ).rejects.toMatchObject(thrown);
      expect(ctx.writes.degradedReason).toBeUndefined();
      expect(pendingCount(ctx)).toBe(0);
      expect(types()).not.toContain('memory:degraded');
      expect(ram.nextId).toBe(nextId);
      expect(ram.entries.map((entry) => entry.content)).toEqual(['before']);
      // The next write goes to the database at once.
      await appendBatch(ctx, ref, [{ role: 'assistant', content: 'after' }]);
      expect(pendingCount(ctx)).toBe(0);
      expect((await history(ctx, ref.sessionKey)).map((entry) => entry.content)).toEqual(['before', 'after']);
    },
  );

  it('is queued on a deadlock as the driver reports it, and written through when tried again', async () => {
    const { ctx, types } = stepContext(getDb());
    const ref = sessionRef();
    let attempts = 0;
    const deadlockedOnce = async (tx: SqlExecutor) => {
      if (attempts++ === 0) throw Object.assign(new Error('deadlock detected'), { code: '40P01' });
      await tx.run("INSERT INTO kv (namespace, key, value, updated_at) VALUES ('test', 'k', 'v', 1)");
    };
    await appendBatch(ctx, ref, [{ role: 'user', content: 'queued' }], deadlockedOnce);
    expect(ctx.writes.degradedReason).toBe('deadlock detected');
    expect(pendingCount(ctx)).toBe(1);
    await retryWrites(ctx);
    expect(ctx.writes.degradedReason).toBeUndefined();
    expect(types()).toEqual(['memory:degraded', 'system:error', 'memory:recovered']);
    expect((await history(ctx, ref.sessionKey)).map((entry) => entry.content)).toEqual(['queued']);
    expect(await getDb().get("SELECT value FROM kv WHERE namespace = 'test'")).toEqual({ value: 'v' });
  });

  it('queued while the database failed, is dropped when written through, and the other sessions land', async () => {
    const { ctx, events, types } = stepContext(getDb());
    const broken = sessionRef('broken');
    const other = sessionRef('other');
    enterDegraded(ctx, sqliteIoError());
    await appendBatch(ctx, broken, [{ role: 'user', content: 'never stored' }], violatesConstraint);
    await appendBatch(ctx, other, [{ role: 'user', content: 'stored' }]);
    expect(pendingCount(ctx)).toBe(2);
    await retryWrites(ctx);
    expect(ctx.writes.degradedReason).toBeUndefined();
    expect(pendingCount(ctx)).toBe(0);
    expect(types()).toEqual(['memory:degraded', 'system:error', 'system:error', 'memory:recovered']);
    expect(events[2]!.data).toMatchObject({
      code: 'INTERNAL',
      component: 'memory',
      message: expect.stringContaining(
        '1 memory write(s) of session s-alpha-broken could not be written through',
      ),
    });
    expect(await history(ctx, broken.sessionKey)).toEqual([]);
    expect((await history(ctx, other.sessionKey)).map((entry) => entry.content)).toEqual(['stored']);
    // Memory writes straight through again.
    await appendBatch(ctx, broken, [{ role: 'user', content: 'after' }]);
    expect(pendingCount(ctx)).toBe(0);
    expect((await history(ctx, broken.sessionKey)).map((entry) => entry.content)).toContain('after');
  });
});
