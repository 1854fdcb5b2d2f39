import { expect, it } from 'vitest';
import { describeEachDatabase } from '../helpers/databases.js';
import { createHarness, sessionRef } from './memory-fixtures.js';

describeEachDatabase('memory ids another writer of the session key took meanwhile', (getDb) => {
  it('are skipped: the commit takes the next free ids and stores every entry once', async () => {
    const { memory } = createHarness(getDb());
    const ref = sessionRef();
    const [first] = await memory.appendBatch(ref, [{ role: 'user', content: 'one' }]);
    expect(first!.memoryId).toBe(1);

    // Another process (another agentd on the same database) reserves five ids of the key.
    await getDb().run('UPDATE memory_counters SET next_id = next_id + 5 WHERE session_key = ?', [
      ref.sessionKey,
    ]);
    const [second, third] = await memory.appendBatch(ref, [
      { role: 'assistant', content: 'two' },
      { role: 'user', content: 'three' },
    ]);
    expect([second!.memoryId, third!.memoryId]).toEqual([7, 8]);
    const [fourth] = await memory.appendBatch(ref, [{ role: 'assistant', content: 'four' }]);
    expect(fourth!.memoryId).toBe(9);

    const rows = await getDb().all<{ memory_id: number; content: string }>(
      'SELECT memory_id, content FROM memory_entries WHERE session_key = ? ORDER BY memory_id',
      [ref.sessionKey],
    );
    expect(rows.map((row) => [Number(row.memory_id), row.content])).toEqual([
      [1, 'one'],
      [7, 'two'],
      [8, 'three'],
      [9, 'four'],
    ]);
    expect(memory.status().degraded).toBe(false);
  });
});
