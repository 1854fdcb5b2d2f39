import { afterEach, expect, it } from 'vitest';
import { createLtmStore } from '../../src/memory/ltm-store.js';
import { createKvStore, migrate, type SqlDatabase } from '../../src/store/index.js';
import { describeEachDatabase, openTestDatabase } from '../helpers/databases.js';
import { migrationsUpTo } from '../helpers/migrations.js';

const eventRow = (id: string, sessionKey: string, createdAtMs: number) => [
  id,
  `session-${sessionKey}`,
  sessionKey,
  'alpha',
  'evicted',
  1,
  10,
  5,
  '[1]',
  `event ${id}`,
  null,
  createdAtMs,
];

describeEachDatabase('kv and memory events keyed by their readers (migration 0021)', (getDb) => {
  const opened: SqlDatabase[] = [];
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((db) => db.close()));
  });

  it('keeps every kv row and memory event of an older database, readable in the same order', async () => {
    const db = await openTestDatabase(getDb().dialect, { migrate: false });
    opened.push(db);
    await migrate(db, { dir: migrationsUpTo(20) });
    await db.run('INSERT INTO kv (namespace, key, value, updated_at) VALUES (?, ?, ?, ?), (?, ?, ?, ?)', [
      'inbox',
      'run-b',
      '{"b":1}',
      5,
      'inbox',
      'run-a',
      '{"a":1}',
      6,
    ]);
    const columns =
      'id, session_id, session_key, agent_id, kind, count, tokens_before, tokens_after, memory_ids, message, details, created_at_ms';
    for (const row of [
      eventRow('mev-1', 'agent:alpha:main', 100),
      eventRow('mev-3', 'agent:alpha:main', 300),
      eventRow('mev-2', 'agent:alpha:main', 300),
      eventRow('mev-4', 'agent:alpha:other', 200),
    ])
      await db.run(`INSERT INTO memory_events (${columns}) VALUES (${row.map(() => '?').join(', ')})`, row);

    expect((await migrate(db)).applied).toContain(21);

    const kv = createKvStore(db);
    expect((await kv.list('inbox')).map((entry) => [entry.key, entry.value])).toEqual([
      ['run-a', '{"a":1}'],
      ['run-b', '{"b":1}'],
    ]);
    await kv.set('inbox', 'run-a', '{"a":2}');
    expect(await kv.get('inbox', 'run-a')).toBe('{"a":2}');
    expect(await kv.delete('inbox', 'run-b')).toBe(true);
    expect(await kv.delete('inbox', 'run-b')).toBe(false);

    const ltm = createLtmStore(db, { sqliteVec: false });
    const events = await ltm.listEvents('agent:alpha:main', 10);
    expect(events.map((event) => event.message)).toEqual(['event mev-3', 'event mev-2', 'event mev-1']);
    expect((await ltm.listEvents('agent:alpha:other', 10)).map((event) => event.message)).toEqual([
      'event mev-4',
    ]);
  });
});
