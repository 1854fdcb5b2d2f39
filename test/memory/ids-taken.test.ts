import { expect, it } from 'vitest';
import { createManualClock } from '../../src/util/index.js';
import { describeEachDatabase } from '../helpers/databases.js';
import { createHarness, sessionRef } from './memory-fixtures.js';

describeEachDatabase('memory ids another writer of the session key took meanwhile', (getDb) => {
  /**
   * Another process (another agentd on the same database) writes entries of the key with the next five ids,
   * as it would: on Postgres through the key's counter, on SQLite, where the next id is read from the
   * entries under the write lock, by the entries alone.
   */
  const anotherWriterTakesFive = async (sessionKey: string, from: number) => {
    const db = getDb();
    if (db.dialect === 'postgres')
      await db.run('UPDATE memory_counters SET next_id = next_id + 5 WHERE session_key = ?', [sessionKey]);
    for (let id = from; id < from + 5; id++)
      await db.run(
        'INSERT INTO memory_entries (session_key, memory_id, session_id, agent_id, kind, role, state, order_key, content, tokens, created_at_ms, updated_at_ms) ' +
          "VALUES (?, ?, 's-other', 'alpha', 'entry', 'user', 'active', ?, 'theirs', 5, 1, 1)",
        [sessionKey, id, id],
      );
  };
  /** A session with one entry (id 1), whose next five ids another writer then took. */
  const oneEntryThenAnotherWriterTakesFive = async () => {
    const { memory } = createHarness(getDb());
    const ref = sessionRef();
    const [first] = await memory.appendBatch(ref, [{ role: 'user', content: 'one' }]);
    expect(first!.memoryId).toBe(1);
    await anotherWriterTakesFive(ref.sessionKey, 2);
    return { memory, ref };
  };

  it('are skipped: the commit takes the next free ids and stores every entry once', async () => {
    const { memory, ref } = await oneEntryThenAnotherWriterTakesFive();
    const [second, third] = await memory.appendBatch(ref, [
      { role: 'assistant', content: 'two' },
      { role: 'user', content: 'three' },
    ]);
    expect([second!.memoryId, third!.memoryId]).toEqual([7, 8]);
    const [fourth] = await memory.appendBatch(ref, [{ role: 'assistant', content: 'four' }]);
    expect(fourth!.memoryId).toBe(9);

    const rows = await getDb().all<{ memory_id: number; content: string }>(
      "SELECT memory_id, content FROM memory_entries WHERE session_key = ? AND session_id <> 's-other' ORDER BY memory_id",
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
    await anotherWriterTakesFive(ref.sessionKey, 3);
    const [third] = await memory.appendBatch(ref, [{ role: 'user', content: 'three' }]);
    expect(third!.memoryId).toBe(8);

    const rows = await getDb().all<{ memory_id: number; state: string; content: string }>(
      "SELECT memory_id, state, content FROM memory_entries WHERE session_key = ? AND session_id <> 's-other' ORDER BY memory_id",
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

  it('are never handed out again once retention deletes the entries that held them', async () => {
    const clock = createManualClock();
    const dayMs = 24 * 60 * 60 * 1000;
    const { memory } = createHarness(getDb(), { clock, config: { retention: { archivedMaxAgeMs: dayMs } } });
    const first = sessionRef('main', 'alpha', 'first');
    await memory.appendBatch(first, [
      { role: 'user', content: 'one' },
      { role: 'assistant', content: 'two' },
    ]);
    await memory.archive('first', 'reset');
    clock.advance(2 * dayMs);
    // The key's only entries go; the next instance still starts after them.
    expect(await memory.applyRetention()).toMatchObject({ archivedSessionsDeleted: 1, entriesDeleted: 2 });
    const next = await memory.append(sessionRef('main', 'alpha', 'second'), {
      role: 'user',
      content: 'three',
    });
    expect(next.memoryId).toBe(3);
  });

  it('are skipped when another writer wrote and then deleted them: its counter keeps them', async () => {
    // Another process wrote ids 2-6 of the key, then its retention deleted them, counting them first.
    const { memory, ref } = await oneEntryThenAnotherWriterTakesFive();
    const db = getDb();
    await db.run(
      'INSERT INTO memory_counters (session_key, next_id) VALUES (?, 7) ON CONFLICT (session_key) DO UPDATE SET next_id = 7',
      [ref.sessionKey],
    );
    await db.run("DELETE FROM memory_entries WHERE session_key = ? AND session_id = 's-other'", [
      ref.sessionKey,
    ]);
    const [second] = await memory.appendBatch(ref, [{ role: 'assistant', content: 'two' }]);
    expect(second!.memoryId).toBe(7);
    const ids = await db.all<{ memory_id: number }>(
      'SELECT memory_id FROM memory_entries WHERE session_key = ? ORDER BY memory_id',
      [ref.sessionKey],
    );
    expect(ids.map((row) => Number(row.memory_id))).toEqual([1, 7]);
  });
});
