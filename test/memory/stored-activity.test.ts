import { expect, it } from 'vitest';
import { describeEachDatabase } from '../helpers/databases.js';
import { createHarness, sessionRef } from './memory-fixtures.js';

describeEachDatabase('the stored last-activity time of a session', (getDb) => {
  it('is written by the first commit, then at most once a second while the session keeps committing', async () => {
    const { memory, clock } = createHarness(getDb());
    const ref = sessionRef();
    const stored = async () =>
      (
        await getDb().get<{ last_active_ms: number }>(
          'SELECT last_active_ms FROM memory_sessions WHERE session_id = ?',
          [ref.sessionId],
        )
      )?.last_active_ms;

    await memory.append(ref, { role: 'user', content: 'first' });
    const first = Number(await stored());
    expect(first).toBe(clock.now());

    clock.advance(999);
    await memory.append(ref, { role: 'assistant', content: 'within the second' });
    expect(Number(await stored())).toBe(first);

    clock.advance(1);
    await memory.append(ref, { role: 'user', content: 'a second later' });
    expect(Number(await stored())).toBe(first + 1_000);
    // Every entry is stored whether or not its commit wrote the time.
    expect((await memory.history(ref.sessionKey)).map((entry) => entry.content)).toEqual([
      'first',
      'within the second',
      'a second later',
    ]);
  });
});
