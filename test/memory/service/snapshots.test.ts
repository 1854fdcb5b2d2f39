import { expect, it } from 'vitest';
import { appendBatch, withSession } from '../../../src/memory/service/ram.js';
import { recall } from '../../../src/memory/service/recall.js';
import { archive, takeSnapshot } from '../../../src/memory/service/snapshots.js';
import { describeEachDatabase } from '../../helpers/databases.js';
import { sessionRef } from '../memory-fixtures.js';
import { stepContext } from './helpers.js';

describeEachDatabase('memory snapshots and archiving', (getDb) => {
  it('records what the context holds and announces it', async () => {
    const { ctx, events } = stepContext(getDb());
    const ref = sessionRef();
    await appendBatch(ctx, ref, [
      { role: 'user', content: 'hello there' },
      { role: 'assistant', content: 'hi' },
    ]);
    const snapshot = await withSession(ctx, ref, (ram) => takeSnapshot(ctx, ram, 'checkpoint'));
    expect(snapshot).toMatchObject({ entryCount: 2, summaryCount: 0, tombstoneCount: 0 });
    expect(snapshot.activeTokens).toBeGreaterThan(0);
    const row = await ctx.db.get<{ reason: string; active_ids: string }>(
      'SELECT reason, active_ids FROM memory_snapshots WHERE id = ?',
      [snapshot.snapshotId],
    );
    expect(row?.reason).toBe('checkpoint');
    expect(events.at(-1)).toMatchObject({ data: { kind: 'snapshot', memoryIds: [1, 2] } });
  });

  it('archives a session once: snapshot, memory kept for recall, RAM dropped, instance closed', async () => {
    const { ctx } = stepContext(getDb());
    const ref = sessionRef();
    await appendBatch(ctx, ref, [{ role: 'user', content: 'remember the blue door' }]);
    const result = await archive(ctx, ref.sessionId, 'reset');
    expect(result).toMatchObject({ sessionKey: ref.sessionKey, archived: true, entryCount: 1 });
    expect(result.snapshotId).toEqual(expect.any(String));
    expect(ctx.sessions.has(ref.sessionId)).toBe(false);
    expect(ctx.sessions.ofKey(ref.sessionKey)).toEqual([]);
    expect(await archive(ctx, ref.sessionId, 'again')).toMatchObject({ archived: false, snapshotId: null });
    expect(await archive(ctx, 'never-seen', 'x')).toMatchObject({ sessionKey: null, archived: false });
    const items = await recall(ctx, { agentId: 'alpha' });
    expect(items.map((item) => item.source)).toEqual(['archive']);
    await expect(appendBatch(ctx, ref, [{ role: 'user', content: 'more' }])).rejects.toMatchObject({
      code: 'CONFLICT',
    });
  });
});
