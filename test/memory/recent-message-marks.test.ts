import { expect, it } from 'vitest';
import { describeEachDatabase } from '../helpers/databases.js';
import { createHarness, sessionRef } from './memory-fixtures.js';

describeEachDatabase('recentMessageMarks: where the recent messages of every key are', (getDb) => {
  it('reads newest first across keys without content, stops at the window and at maxEntries, across pages', async () => {
    const { memory, clock } = createHarness(getDb());
    const first = sessionRef('first');
    const second = sessionRef('second', 'beta');
    await memory.append(first, { role: 'user', content: 'too old', metadata: { runId: 'old' } });
    clock.advance(10_000);
    const windowStart = clock.now();
    await memory.append(first, { role: 'user', content: 'hello', metadata: { runId: 'r1' } });
    await memory.append(first, { role: 'system', content: 'a note', metadata: { injected: true } });
    clock.advance(5);
    await memory.append(second, { role: 'user', content: 'hi', metadata: { runId: 'r2' } });
    // A tool round is not a message: left out.
    await memory.append(second, {
      role: 'assistant',
      content: '',
      toolCalls: [{ id: 'c1', name: 'clock', arguments: {} }],
      metadata: { runId: 'r2' },
    });
    await memory.append(second, { role: 'tool', content: 'noon', toolCallId: 'c1', toolName: 'clock' });
    clock.advance(5);
    await memory.append(first, { role: 'assistant', content: 'hello back', metadata: { runId: 'r1' } });

    const marks = await memory.recentMessageMarks({ sinceMs: windowStart, maxEntries: 100 });
    const expected = (
      ref: typeof first,
      memoryId: number,
      role: string,
      atMs: number,
      metadata: Record<string, unknown>,
    ) => ({
      address: `${ref.sessionKey}#${memoryId}`,
      sessionKey: ref.sessionKey,
      agentId: ref.agentId,
      role,
      createdAtMs: windowStart + atMs,
      metadata,
    });
    expect(marks).toEqual([
      expected(first, 4, 'assistant', 10, { runId: 'r1' }),
      expected(second, 2, 'assistant', 5, { runId: 'r2' }),
      expected(second, 1, 'user', 5, { runId: 'r2' }),
      expected(first, 3, 'system', 0, { injected: true }),
      expected(first, 2, 'user', 0, { runId: 'r1' }),
    ]);
    expect(await memory.recentMessageMarks({ sinceMs: windowStart, maxEntries: 2 })).toHaveLength(2);

    // Written last but made before the window (an entry queued in RAM while the disk was full): skipped,
    // and the walk goes on past it to the window's rows.
    await memory.append(second, {
      role: 'assistant',
      content: 'queued while full',
      metadata: { runId: 'late' },
      createdAtMs: windowStart - 1,
    });
    expect(
      (await memory.recentMessageMarks({ sinceMs: windowStart, maxEntries: 100 })).map(
        (mark) => mark.metadata?.runId,
      ),
    ).toEqual(['r1', 'r2', 'r2', undefined, 'r1']);

    // More than one page (1,000 rows) of the window.
    await memory.appendBatch(
      first,
      Array.from({ length: 1_200 }, (_, index) => ({
        role: index % 2 === 0 ? ('user' as const) : ('assistant' as const),
        content: `turn ${index}`,
        metadata: { runId: `bulk-${Math.floor(index / 2)}` },
      })),
    );
    const all = await memory.recentMessageMarks({ sinceMs: windowStart, maxEntries: 10_000 });
    expect(all).toHaveLength(1_205);
    expect(all.at(-1)?.metadata).toEqual({ runId: 'r1' });
    expect(all.map((mark) => mark.metadata?.runId)).not.toContain('old');
  });
});
