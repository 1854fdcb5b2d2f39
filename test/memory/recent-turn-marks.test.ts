import { expect, it } from 'vitest';
import { describeEachDatabase } from '../helpers/databases.js';
import { createHarness, sessionRef } from './memory-fixtures.js';

describeEachDatabase(
  'recentTurnMarks: where the recent user and assistant entries of every key are',
  (getDb) => {
    it('reads newest first across keys without content, stops at the window and at maxEntries, across pages', async () => {
      const { memory, clock } = createHarness(getDb());
      const first = sessionRef('first');
      const second = sessionRef('second', 'beta');
      await memory.append(first, { role: 'user', content: 'too old', metadata: { runId: 'old' } });
      clock.advance(10_000);
      const windowStart = clock.now();
      await memory.append(first, { role: 'user', content: 'hello', metadata: { runId: 'r1' } });
      await memory.append(first, { role: 'system', content: 'not a turn' });
      clock.advance(5);
      await memory.append(second, { role: 'user', content: 'hi', metadata: { runId: 'r2' } });
      clock.advance(5);
      await memory.append(first, { role: 'assistant', content: 'hello back', metadata: { runId: 'r1' } });

      const marks = await memory.recentTurnMarks({ sinceMs: windowStart, maxEntries: 100 });
      const expected = (ref: typeof first, memoryId: number, role: string, atMs: number, runId: string) => ({
        address: `${ref.sessionKey}#${memoryId}`,
        sessionKey: ref.sessionKey,
        agentId: ref.agentId,
        role,
        createdAtMs: windowStart + atMs,
        metadata: { runId },
      });
      expect(marks).toEqual([
        expected(first, 4, 'assistant', 10, 'r1'),
        expected(second, 1, 'user', 5, 'r2'),
        expected(first, 2, 'user', 0, 'r1'),
      ]);
      expect(await memory.recentTurnMarks({ sinceMs: windowStart, maxEntries: 2 })).toHaveLength(2);

      // Written last but made before the window (an entry queued in RAM while the disk was full): skipped,
      // and the walk goes on past it to the window's rows.
      await memory.append(second, {
        role: 'assistant',
        content: 'queued while full',
        metadata: { runId: 'late' },
        createdAtMs: windowStart - 1,
      });
      expect(
        (await memory.recentTurnMarks({ sinceMs: windowStart, maxEntries: 100 })).map(
          (mark) => mark.metadata?.runId,
        ),
      ).toEqual(['r1', 'r2', 'r1']);

      // More than one page (1,000 rows) of the window.
      await memory.appendBatch(
        first,
        Array.from({ length: 1_200 }, (_, index) => ({
          role: index % 2 === 0 ? ('user' as const) : ('assistant' as const),
          content: `turn ${index}`,
          metadata: { runId: `bulk-${Math.floor(index / 2)}` },
        })),
      );
      const all = await memory.recentTurnMarks({ sinceMs: windowStart, maxEntries: 10_000 });
      expect(all).toHaveLength(1_203);
      expect(all.at(-1)?.metadata).toEqual({ runId: 'r1' });
      expect(all.map((mark) => mark.metadata?.runId)).not.toContain('old');
    });
  },
);
