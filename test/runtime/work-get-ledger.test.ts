import { describe, expect, it } from 'vitest';
import { startRuntime } from './helpers.js';

describe('work.get over the gateway', () => {
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
});
