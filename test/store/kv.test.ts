import { beforeEach, expect, it } from 'vitest';
import { createKvStore, type KvStore } from '../../src/store/index.js';
import { createManualClock } from '../../src/util/index.js';
import { describeEachDatabase } from '../helpers/databases.js';

describeEachDatabase('KvStore', (getDb) => {
  let clock: ReturnType<typeof createManualClock>;
  let kv: KvStore;
  beforeEach(() => {
    clock = createManualClock(100);
    kv = createKvStore(getDb(), { clock });
  });

  it('sets, overwrites, reads and deletes values per namespace', async () => {
    expect(await kv.get('auth', 'token')).toBeUndefined();
    await kv.set('auth', 'token', 'one');
    await kv.set('other', 'token', 'elsewhere');
    clock.advance(5);
    await kv.set('auth', 'token', 'two');
    expect(await kv.get('auth', 'token')).toBe('two');
    expect(await kv.get('other', 'token')).toBe('elsewhere');
    expect(await kv.delete('auth', 'token')).toBe(true);
    expect(await kv.delete('auth', 'token')).toBe(false);
    expect(await kv.get('auth', 'token')).toBeUndefined();
    expect(await kv.get('other', 'token')).toBe('elsewhere');
  });

  it('lists a namespace by key in byte order with update times', async () => {
    await kv.set('n', 'b', '2');
    clock.advance(1);
    await kv.set('n', 'B', '1');
    await kv.set('n', 'a', JSON.stringify({ json: true }));
    await kv.set('m', 'z', 'not listed');
    expect(await kv.list('n')).toEqual([
      { key: 'B', value: '1', updatedAt: 101 },
      { key: 'a', value: '{"json":true}', updatedAt: 101 },
      { key: 'b', value: '2', updatedAt: 100 },
    ]);
    expect(await kv.list('empty')).toEqual([]);
  });
});
