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

  it('are skipped by a commit that also evicts: the eviction is written once, with the new tombstone ids', async () => {
    const { memory } = createHarness(getDb(), { config: { maxActiveEntries: 2, evictDownToRatio: 1 } });
    const ref = sessionRef();
    await memory.appendBatch(ref, [
      { role: 'user', content: 'one' },
      { role: 'assistant', content: 'two' },
    ]);
    await getDb().run('UPDATE memory_counters SET next_id = next_id + 5 WHERE session_key = ?', [
      ref.sessionKey,
    ]);
    const [third] = await memory.appendBatch(ref, [{ role: 'user', content: 'three' }]);
    expect(third!.memoryId).toBe(8);

    const rows = await getDb().all<{ memory_id: number; state: string; content: string }>(
      'SELECT memory_id, state, content FROM memory_entries WHERE session_key = ? ORDER BY memory_id',
      [ref.sessionKey],
    );
    expect(rows.map((row) => [Number(row.memory_id), row.state, row.content])).toEqual([
      [1, 'evicted', 'one'],
      [2, 'active', 'two'],
      [8, 'active', 'three'],
      [9, 'tombstone', '[evicted:1]'],
    ]);
    expect(await getDb().all('SELECT kind, memory_ids FROM memory_events')).toEqual([
      { kind: 'evicted', memory_ids: '[1]' },
    ]);
  });
});
