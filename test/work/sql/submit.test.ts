import { expect, it } from 'vitest';
import { getMany } from '../../../src/work/sql/read.js';
import { submit } from '../../../src/work/sql/submit.js';
import { WorkErrorCodes } from '../../../src/work/states.js';
import { describeEachDatabase } from '../../helpers/databases.js';
import { stepContext, submitted } from './helpers.js';

describeEachDatabase('work sql: submit', (getDb) => {
  it('inserts a queued item with defaults and wakes idle workers', async () => {
    const { ctx, clock, types } = stepContext(getDb(), { maxAttempts: 4 });
    const before = ctx.state.wakeSequence;
    const item = await submitted(ctx, { description: 'first line\nsecond line', delayMs: 50 });
    expect(item).toMatchObject({
      state: 'queued',
      title: 'first line',
      attempts: 0,
      maxAttempts: 4,
      runAfter: clock.now() + 50,
      depth: 0,
    });
    expect(types()).toEqual(['work:submitted']);
    expect(ctx.state.wakeSequence).toBe(before + 1);
  });

  it('a paused submission wakes nobody', async () => {
    const { ctx } = stepContext(getDb());
    const before = ctx.state.wakeSequence;
    expect((await submitted(ctx, { paused: true })).state).toBe('paused');
    expect(ctx.state.wakeSequence).toBe(before);
  });

  it('merges a duplicate into the live item and records the merge', async () => {
    const { ctx, types } = stepContext(getDb());
    const first = await submit(ctx, { kind: 'task', description: 'a', dedupKey: 'k' });
    const second = await submit(ctx, { kind: 'task', description: 'b', dedupKey: 'k' });
    expect(second).toEqual({ id: first.id, merged: true, mergedRecordId: expect.any(String) });
    const [record] = await getMany(ctx, [second.mergedRecordId!]);
    expect(record).toMatchObject({ state: 'merged', mergedInto: first.id });
    expect(types()).toEqual(['work:submitted', 'work:merged']);
  });

  it('answers an idempotency key submitted again with the item made the first time, in any state', async () => {
    const { ctx, types } = stepContext(getDb());
    const first = await submit(ctx, { kind: 'task', description: 'a', idempotencyKey: 'once' });
    expect(first).toEqual({ id: expect.any(String), merged: false });
    expect(await submit(ctx, { kind: 'task', description: 'a', idempotencyKey: 'once' })).toEqual({
      id: first.id,
      merged: false,
      duplicate: true,
    });
    // Ended, it still answers: the dedup key would have made a second item by now.
    await getDb().run("UPDATE work_items SET state = 'completed', resolved_at = 1 WHERE id = ?", [first.id]);
    expect(await submit(ctx, { kind: 'task', description: 'a', idempotencyKey: 'once' })).toMatchObject({
      id: first.id,
      duplicate: true,
    });
    // At once, twice: one item.
    const racing = await Promise.all([
      submit(ctx, { kind: 'task', description: 'b', idempotencyKey: 'race' }),
      submit(ctx, { kind: 'task', description: 'b', idempotencyKey: 'race' }),
    ]);
    expect(racing[0].id).toBe(racing[1].id);
    expect(racing.filter((answer) => answer.duplicate)).toHaveLength(1);
    const another = await submit(ctx, { kind: 'task', description: 'c', idempotencyKey: 'other' });
    expect(another.id).not.toBe(first.id);
    const rows = await getDb().all<{ n: number }>('SELECT COUNT(*) AS n FROM work_items');
    expect(Number(rows[0]!.n)).toBe(3);
    expect(types().filter((type) => type === 'work:submitted')).toHaveLength(3);
  });

  it('answers a key whose submission was merged with that merge, and child work whose parent ended since', async () => {
    const { ctx } = stepContext(getDb());
    const live = await submit(ctx, { kind: 'task', description: 'a', dedupKey: 'd' });
    const merged = await submit(ctx, { kind: 'task', description: 'b', dedupKey: 'd', idempotencyKey: 'm' });
    expect(merged).toMatchObject({ id: live.id, merged: true });
    expect(await submit(ctx, { kind: 'task', description: 'b', dedupKey: 'd', idempotencyKey: 'm' })).toEqual(
      {
        ...merged,
        duplicate: true,
      },
    );

    const parent = await submitted(ctx, {});
    const child = await submit(ctx, {
      kind: 'task',
      description: 'x',
      parentId: parent.id,
      idempotencyKey: 'c',
    });
    await getDb().run("UPDATE work_items SET state = 'completed', resolved_at = 1 WHERE id = ?", [parent.id]);
    expect(
      await submit(ctx, { kind: 'task', description: 'x', parentId: parent.id, idempotencyKey: 'c' }),
    ).toEqual({ ...child, duplicate: true });
  });

  it('child work inherits priority and session, and stops at the depth and fan-out limits', async () => {
    const { ctx } = stepContext(getDb(), { maxDepth: 1, maxChildren: 1 });
    const parent = await submitted(ctx, { priority: 7, sessionKey: 's1' });
    const child = await submitted(ctx, { parentId: parent.id });
    expect(child).toMatchObject({ depth: 1, priority: 7, sessionKey: 's1', parentId: parent.id });
    await expect(submit(ctx, { kind: 'task', description: 'x', parentId: parent.id })).rejects.toMatchObject({
      code: WorkErrorCodes.fanOutLimit,
    });
    await expect(submit(ctx, { kind: 'task', description: 'x', parentId: child.id })).rejects.toMatchObject({
      code: WorkErrorCodes.depthLimit,
    });
    await expect(
      submit(ctx, { kind: 'task', description: 'x', parentId: 'work-nope' }),
    ).rejects.toMatchObject({
      code: 'NOT_FOUND',
    });
  });

  it('refuses an invalid submission with a clear error', async () => {
    const { ctx, types } = stepContext(getDb());
    await expect(submit(ctx, { kind: '', description: 'x' })).rejects.toMatchObject({
      code: 'INVALID_REQUEST',
      message: expect.stringContaining('invalid work submission'),
    });
    expect(types()).toEqual([]);
  });
});
