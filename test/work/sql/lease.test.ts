import { expect, it } from 'vitest';
import { heartbeat, start } from '../../../src/work/sql/lease.js';
import { WorkErrorCodes } from '../../../src/work/states.js';
import { describeEachDatabase } from '../../helpers/databases.js';
import { claimed, stepContext } from './helpers.js';

describeEachDatabase('work sql: start and heartbeat', (getDb) => {
  it('starts a claimed item for its lease holder only', async () => {
    const { ctx, clock, types } = stepContext(getDb(), { leaseMs: 1_000 });
    const item = await claimed(ctx, 'w1');
    await expect(start(ctx, item.id, 'w2')).rejects.toMatchObject({ code: WorkErrorCodes.leaseExpired });
    clock.advance(10);
    expect(await start(ctx, item.id, 'w1')).toMatchObject({
      state: 'running',
      startedAt: clock.now(),
      leaseExpiresAt: clock.now() + 1_000,
    });
    expect(types().at(-1)).toBe('work:started');
    await expect(start(ctx, item.id, 'w1')).rejects.toMatchObject({ code: WorkErrorCodes.invalidTransition });
  });

  it('extends a held lease and refuses a lapsed or foreign one', async () => {
    const { ctx, clock } = stepContext(getDb(), { leaseMs: 1_000 });
    const item = await claimed(ctx, 'w1', { start: true });
    clock.advance(900);
    expect((await heartbeat(ctx, item.id, 'w1', { leaseMs: 5_000 })).leaseExpiresAt).toBe(
      clock.now() + 5_000,
    );
    await expect(heartbeat(ctx, item.id, 'w2')).rejects.toMatchObject({
      code: WorkErrorCodes.leaseExpired,
      message: expect.stringContaining('held by w1'),
    });
    clock.advance(5_000);
    await expect(heartbeat(ctx, item.id, 'w1')).rejects.toMatchObject({ code: WorkErrorCodes.leaseExpired });
    await expect(heartbeat(ctx, 'work-nope', 'w1')).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });
});
