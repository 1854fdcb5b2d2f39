import { describe, expect, it } from 'vitest';
import { startRuntime } from './helpers.js';

describe('work.get and ledger.read over the gateway', () => {
  it("answers the item's newest ledger entries, ledgerLast of them (1,000 by default), not all it ever had", async () => {
    const started = await startRuntime();
    const client = await started.connect();
    try {
      const { id } = await started.runtime.work.queue.submit({
        kind: 'task',
        title: 'long job',
        paused: true,
      });
      for (let index = 1; index <= 1_005; index++)
        await started.runtime.ledger.append(id, { entryType: 'note', content: `note ${index}` });

      const byDefault = await client.call<{ ledger: Array<{ content: string }> }>('work.get', { id });
      expect(byDefault.ledger).toHaveLength(1_000);
      expect(byDefault.ledger[0]!.content).toBe('note 6');
      expect(byDefault.ledger.at(-1)!.content).toBe('note 1005');

      const newest = await client.call<{ ledger: Array<{ content: string }> }>('work.get', {
        id,
        ledgerLast: 2,
      });
      expect(newest.ledger.map((entry) => entry.content)).toEqual(['note 1004', 'note 1005']);
      await expect(client.call('work.get', { id, ledgerLast: 10_001 })).rejects.toMatchObject({
        code: 'INVALID_REQUEST',
      });
    } finally {
      await client.close();
      await started.runtime.close();
    }
  });

  it("ledger.read answers a ledger without a work item: a chat session's, and a pruned item's", async () => {
    const started = await startRuntime();
    const client = await started.connect();
    try {
      await started.runtime.ledger.append('session:main', {
        entryType: 'decision',
        content: 'keep it short',
      });
      const { id } = await started.runtime.work.queue.submit({ kind: 'task', title: 'gone soon' });
      await started.runtime.ledger.append(id, { entryType: 'finding', content: 'forty nets' });
      await started.runtime.ledger.append(id, { entryType: 'note', content: 'done' });
      await started.runtime.work.queue.cancel(id);
      const pruned = await started.runtime.work.queue.deleteEnded({
        lane: { state: 'cancelled' },
        before: Date.now() + 60_000,
        maxRows: 10,
      });
      expect(pruned.deleted).toBe(1);
      await expect(client.call('work.get', { id })).rejects.toMatchObject({ code: 'NOT_FOUND' });

      type Read = { workItemId: string; entries: Array<{ entryType: string; content: string }> };
      const session = await client.call<Read>('ledger.read', { id: 'session:main' });
      expect(session.entries.map((entry) => entry.content)).toEqual(['keep it short']);
      const kept = await client.call<Read>('ledger.read', { id });
      expect(kept.entries.map((entry) => entry.content)).toEqual(['forty nets', 'done']);
      const findings = await client.call<Read>('ledger.read', { id, entryType: 'finding' });
      expect(findings).toEqual({
        workItemId: id,
        entries: [expect.objectContaining({ content: 'forty nets' })],
      });
      // A known ledger with no entry of the type asked is empty, not unknown.
      expect((await client.call<Read>('ledger.read', { id, entryType: 'plan' })).entries).toEqual([]);
      expect((await client.call<Read>('ledger.read', { id, lastN: 1 })).entries).toHaveLength(1);

      await expect(client.call('ledger.read', { id: 'work_nope' })).rejects.toMatchObject({
        code: 'NOT_FOUND',
      });
      await expect(client.call('ledger.read', { id: 'work_nope', entryType: 'plan' })).rejects.toMatchObject({
        code: 'NOT_FOUND',
      });
      await expect(client.call('ledger.read', { id, entryType: 'secret' })).rejects.toMatchObject({
        code: 'INVALID_REQUEST',
      });
      await expect(client.call('ledger.read', { id, lastN: 10_001 })).rejects.toMatchObject({
        code: 'INVALID_REQUEST',
      });
    } finally {
      await client.close();
      await started.runtime.close();
    }
  });
});
