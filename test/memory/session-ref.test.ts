import { describe, expect, it } from 'vitest';
import type { SessionRef } from '../../src/memory/index.js';
import { createMemoryStore } from '../../src/store/index.js';
import { createHarness, sessionRef } from './memory-fixtures.js';

describe('session references', () => {
  const bad: Array<[string, unknown]> = [
    ['no session id', { sessionId: '', sessionKey: 'agent:alpha:main', agentId: 'alpha' }],
    ['session id too long', { sessionId: 's'.repeat(257), sessionKey: 'agent:alpha:main', agentId: 'alpha' }],
    ['no agent id', { sessionId: 's', sessionKey: 'agent::main', agentId: '' }],
    [
      'agent id too long',
      { sessionId: 's', sessionKey: `agent:${'a'.repeat(129)}:k`, agentId: 'a'.repeat(129) },
    ],
    ['key of another agent', { sessionId: 's', sessionKey: 'agent:beta:main', agentId: 'alpha' }],
    [
      'agent id a prefix of the key agent',
      { sessionId: 's', sessionKey: 'agent:alphabet:main', agentId: 'alpha' },
    ],
    ['key without a rest', { sessionId: 's', sessionKey: 'agent:alpha:', agentId: 'alpha' }],
    ['key without agent prefix', { sessionId: 's', sessionKey: 'user:alpha:main', agentId: 'alpha' }],
    ['key with a newline rest only', { sessionId: 's', sessionKey: 'agent:alpha:\n', agentId: 'alpha' }],
    ['key too long', { sessionId: 's', sessionKey: `agent:alpha:${'k'.repeat(501)}`, agentId: 'alpha' }],
    ['numbers for strings', { sessionId: 1, sessionKey: 'agent:alpha:main', agentId: 'alpha' }],
    ['not an object', 'agent:alpha:main'],
    ['null', null],
  ];

  it.each(bad)('refuses %s with INVALID_REQUEST and stores nothing', async (_name, ref) => {
    const store = await createMemoryStore();
    const { memory } = createHarness(store.db);
    await expect(memory.append(ref as SessionRef, { role: 'user', content: 'x' })).rejects.toMatchObject({
      code: 'INVALID_REQUEST',
    });
    expect(memory.loadedSessions()).toEqual([]);
  });

  it('takes a valid reference and keeps only its three fields', async () => {
    const store = await createMemoryStore();
    const { memory } = createHarness(store.db);
    const ref = { ...sessionRef('main:with:colons'), extra: 'ignored' } as SessionRef;
    const entry = await memory.append(ref, { role: 'user', content: 'hello' });
    expect(entry).toMatchObject({
      sessionKey: 'agent:alpha:main:with:colons',
      agentId: 'alpha',
      memoryId: 1,
    });
    expect(memory.loadedSessions().map((session) => session.sessionKey)).toEqual([
      'agent:alpha:main:with:colons',
    ]);
  });
});
