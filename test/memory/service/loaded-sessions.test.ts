import { describe, expect, it } from 'vitest';
import type { RamSession } from '../../../src/memory/service/context.js';
import { LoadedSessions } from '../../../src/memory/service/loaded-sessions.js';

/** Only the ref and the entries matter to the index; the rest of a RAM context is not read. */
const contextOf = (sessionId: string, sessionKey: string) =>
  ({
    ref: { sessionId, sessionKey, agentId: sessionKey.split(':')[1]! },
    entries: [],
  }) as unknown as RamSession;

describe('loaded sessions, by id and by key', () => {
  it('finds the contexts of a key among many, in the order they were loaded', () => {
    const loaded = new LoadedSessions();
    for (let index = 0; index < 50; index++)
      loaded.add(contextOf(`other-${index}`, `agent:main:other-${index}`));
    const first = contextOf('instance-1', 'agent:main:main');
    const second = contextOf('instance-2', 'agent:main:main');
    loaded.add(first);
    loaded.add(second);
    expect(loaded.ofKey('agent:main:main')).toEqual([first, second]);
    expect(loaded.ofKey('agent:main:nobody')).toEqual([]);
    expect(loaded.size).toBe(52);
    expect(loaded.get('instance-2')).toBe(second);
    expect(loaded.has('instance-1')).toBe(true);
  });

  it('forgets a context it unloads, and the key once its last context is gone', () => {
    const loaded = new LoadedSessions();
    const first = contextOf('instance-1', 'agent:main:main');
    const second = contextOf('instance-2', 'agent:main:main');
    loaded.add(first);
    loaded.add(second);
    expect(loaded.delete('instance-1')).toBe(true);
    expect(loaded.ofKey('agent:main:main')).toEqual([second]);
    expect(loaded.has('instance-1')).toBe(false);
    expect(loaded.delete('instance-1')).toBe(false);
    expect(loaded.delete('instance-2')).toBe(true);
    expect(loaded.ofKey('agent:main:main')).toEqual([]);
    expect(loaded.size).toBe(0);
    expect([...loaded.values()]).toEqual([]);
  });

  it('replaces a context loaded again under its id without leaving the old one under its key', () => {
    const loaded = new LoadedSessions();
    const before = contextOf('instance-1', 'agent:main:main');
    const after = contextOf('instance-1', 'agent:main:main');
    loaded.add(before);
    loaded.add(contextOf('instance-2', 'agent:main:other'));
    loaded.add(after);
    expect(loaded.ofKey('agent:main:main')).toEqual([after]);
    // As a Map keeps a key's place when its value is replaced.
    expect([...loaded.values()].map((ram) => ram.ref.sessionId)).toEqual(['instance-1', 'instance-2']);
    expect(loaded.size).toBe(2);
  });

  it('answers a key without contexts with a frozen empty list that a later load leaves empty', () => {
    const loaded = new LoadedSessions();
    const none = loaded.ofKey('agent:main:main');
    expect(Object.isFrozen(none)).toBe(true);
    loaded.add(contextOf('instance-1', 'agent:main:main'));
    expect(none).toEqual([]);
    expect(loaded.ofKey('agent:main:main')).toHaveLength(1);
  });

  it('keeps count of the entries its contexts held when last counted', () => {
    const loaded = new LoadedSessions();
    const first = contextOf('instance-1', 'agent:main:main');
    const second = contextOf('instance-2', 'agent:main:other');
    first.entries.length = 3;
    loaded.add(first);
    loaded.add(second);
    expect(loaded.countedEntries).toBe(3);
    second.entries.length = 5;
    // Not counted until asked: the RAM layer recounts a context after it changes it.
    expect(loaded.countedEntries).toBe(3);
    loaded.recount(second);
    expect(loaded.countedEntries).toBe(8);
    first.entries.length = 1;
    expect(loaded.recountAll()).toBe(6);
    expect(loaded.countedEntries).toBe(6);
    expect(loaded.delete('instance-2')).toBe(true);
    expect(loaded.countedEntries).toBe(1);
    // A context no longer loaded is not counted again.
    loaded.recount(second);
    expect(loaded.countedEntries).toBe(1);
  });
});
