import { expect, it } from 'vitest';
import { createChatOwnerLease } from '../../src/store/index.js';
import { describeEachDatabase } from '../helpers/databases.js';

describeEachDatabase('chat owners’ leases (migration 0050)', (getDb) => {
  it('renews a lease while it is open, tells lapsed ones apart, forgets them, and gives its own up', async () => {
    const db = getDb();
    const now =
      db.dialect === 'sqlite'
        ? "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"
        : '(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint';
    const lease = await createChatOwnerLease({ db, ownerId: 'host-a/1/a', leaseMs: 300 });
    // Another host's, lapsed a second ago; a third's, fresh for a minute.
    await db.run(`INSERT INTO chat_owners (owner_id, alive_until) VALUES (?, ${now} - 1000)`, ['host-b/2/b']);
    await db.run(`INSERT INTO chat_owners (owner_id, alive_until) VALUES (?, ${now} + 60000)`, [
      'host-c/3/c',
    ]);
    // Past its own length: renewed every third of it, it still holds.
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect([...(await lease.live())].sort()).toEqual(['host-a/1/a', 'host-c/3/c']);
    expect(await lease.lapsed()).toEqual(['host-b/2/b']);
    // Only a lease that lapsed is forgotten: one renewed meanwhile stays.
    await lease.forget(['host-b/2/b', 'host-c/3/c']);
    const rows = async () =>
      (await db.all<{ owner_id: string }>('SELECT owner_id FROM chat_owners ORDER BY owner_id')).map(
        (row) => row.owner_id,
      );
    expect(await rows()).toEqual(['host-a/1/a', 'host-c/3/c']);
    await lease.close();
    expect(await rows()).toEqual(['host-c/3/c']);
    // Closed, it no longer renews: nothing writes its row again.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await rows()).toEqual(['host-c/3/c']);
  });
});
