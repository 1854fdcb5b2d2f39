import { beforeEach, describe, expect, it } from 'vitest';
import {
  createSessionStore,
  formatSessionKey,
  isUniqueViolation,
  parseSessionKey,
  type SessionStore,
} from '../../src/store/index.js';
import { createManualClock, createSequentialIdGenerator } from '../../src/util/index.js';
import { describeEachDatabase } from '../helpers/databases.js';

describe('session keys', () => {
  it('formats and parses agent:<agentId>:<key>', () => {
    expect(formatSessionKey('main', 'dm:alice')).toBe('agent:main:dm:alice');
    expect(parseSessionKey('agent:main:dm:alice')).toEqual({ agentId: 'main', key: 'dm:alice' });
    expect(parseSessionKey('main')).toBeUndefined();
    expect(parseSessionKey('agent::x')).toBeUndefined();
    expect(parseSessionKey('agent:main:')).toBeUndefined();
  });
});

describeEachDatabase('SessionStore', (getDb) => {
  let clock: ReturnType<typeof createManualClock>;
  let sessions: SessionStore;
  beforeEach(() => {
    clock = createManualClock(1_000);
    sessions = createSessionStore(getDb(), { clock, idGenerator: createSequentialIdGenerator() });
  });

  it('creates the active instance once and returns it afterwards', async () => {
    const created = await sessions.ensureActive('agent:main:main', 'main');
    expect(created).toEqual({
      id: 'ses_1',
      sessionKey: 'agent:main:main',
      agentId: 'main',
      status: 'active',
      title: null,
      summary: null,
      metadata: {},
      messageCount: 0,
      createdAt: 1_000,
      lastActiveAt: 1_000,
      archivedAt: null,
      archiveReason: null,
    });
    clock.advance(5);
    expect(await sessions.ensureActive('agent:main:main', 'main')).toEqual(created);
    expect(await sessions.getActive('agent:main:main')).toEqual(created);
    expect(await sessions.getById('ses_1')).toEqual(created);
    expect(await sessions.getById('nope')).toBeUndefined();
  });

  it('refuses a key that names another agent, and empty keys', async () => {
    await expect(sessions.ensureActive('agent:other:main', 'main')).rejects.toMatchObject({
      code: 'INVALID_REQUEST',
    });
    await expect(sessions.ensureActive('', 'main')).rejects.toMatchObject({ code: 'INVALID_REQUEST' });
  });

  it('gives concurrent callers the same single instance', async () => {
    const results = await Promise.all(
      Array.from({ length: 12 }, () => sessions.ensureActive('agent:main:race', 'main')),
    );
    expect(new Set(results.map((session) => session.id)).size).toBe(1);
    const count = await getDb().get<{ n: number }>(
      'SELECT COUNT(*) AS n FROM sessions WHERE session_key = ?',
      ['agent:main:race'],
    );
    expect(count).toEqual({ n: 1 });
  });

  it('enforces one active instance per key in the schema', async () => {
    await sessions.ensureActive('agent:main:main', 'main');
    const error = await getDb()
      .run(
        `INSERT INTO sessions (id, session_key, agent_id, status, metadata, message_count, created_at, last_active_at)
         VALUES ('dup', 'agent:main:main', 'main', 'active', '{}', 0, 1, 1)`,
      )
      .catch((caught: unknown) => caught);
    expect(isUniqueViolation(error)).toBe(true);
  });

  it('archives the active instance so the next message starts a new one', async () => {
    const first = await sessions.ensureActive('agent:main:main', 'main');
    clock.advance(10);
    const archived = await sessions.archive('agent:main:main', 'new');
    expect(archived).toMatchObject({
      id: first.id,
      status: 'archived',
      archivedAt: 1_010,
      archiveReason: 'new',
    });
    expect(await sessions.getActive('agent:main:main')).toBeUndefined();
    expect(await sessions.archive('agent:main:main', 'again')).toBeUndefined();
    clock.advance(10);
    const second = await sessions.ensureActive('agent:main:main', 'main');
    expect(second.id).not.toBe(first.id);
    expect(second.createdAt).toBe(1_020);
    expect((await sessions.list()).map((session) => session.id)).toEqual([second.id]);
    expect((await sessions.list({ includeArchived: true })).map((session) => session.id).sort()).toEqual(
      [first.id, second.id].sort(),
    );
  });

  it('counts messages and moves last activity forward only', async () => {
    const session = await sessions.ensureActive('agent:main:main', 'main');
    expect(await sessions.touch(session.id, { messageDelta: 2, at: 5_000 })).toBe(true);
    expect(await sessions.getById(session.id)).toMatchObject({ messageCount: 2, lastActiveAt: 5_000 });
    expect(await sessions.touch(session.id, { messageDelta: 1, at: 4_000 })).toBe(true);
    expect(await sessions.getById(session.id)).toMatchObject({ messageCount: 3, lastActiveAt: 5_000 });
    expect(await sessions.touch('missing', { messageDelta: 1 })).toBe(false);
  });

  it('moves last activity at most once a second per session, and counts every message', async () => {
    const session = await sessions.ensureActive('agent:main:main', 'main');
    const other = await sessions.ensureActive('agent:main:other', 'main');
    await sessions.touch(session.id, { messageDelta: 1, at: 10_000 });
    await sessions.touch(session.id, { messageDelta: 2, at: 10_999 });
    await sessions.touch(other.id, { messageDelta: 1, at: 10_500 });
    expect(await sessions.getById(session.id)).toMatchObject({ messageCount: 3, lastActiveAt: 10_000 });
    expect(await sessions.getById(other.id)).toMatchObject({ messageCount: 1, lastActiveAt: 10_500 });
    expect((await sessions.list()).map((listed) => listed.id)).toEqual([other.id, session.id]);
    await sessions.touch(session.id, { messageDelta: 1, at: 11_000 });
    expect(await sessions.getById(session.id)).toMatchObject({ messageCount: 4, lastActiveAt: 11_000 });
    expect((await sessions.list()).map((listed) => listed.id)).toEqual([session.id, other.id]);
    // Another store (another process on the same database) keeps its own pace and never moves it back.
    const elsewhere = createSessionStore(getDb());
    await elsewhere.touch(session.id, { messageDelta: 1, at: 11_500 });
    await sessions.touch(session.id, { messageDelta: 1, at: 11_600 });
    expect(await sessions.getById(session.id)).toMatchObject({ messageCount: 6, lastActiveAt: 11_500 });
    const everyTouch = createSessionStore(getDb(), { activityResolutionMs: 0 });
    await everyTouch.touch(session.id, { at: 11_501 });
    expect(await sessions.getById(session.id)).toMatchObject({ messageCount: 6, lastActiveAt: 11_501 });
  });

  it('patches title, summary and metadata', async () => {
    const session = await sessions.ensureActive('agent:main:main', 'main');
    const patched = await sessions.patch(session.id, {
      title: 'Trip',
      metadata: { channel: 'web', tags: ['a'] },
    });
    expect(patched).toMatchObject({
      title: 'Trip',
      summary: null,
      metadata: { channel: 'web', tags: ['a'] },
    });
    const summarized = await sessions.patch(session.id, { summary: 'planned a trip', title: null });
    expect(summarized).toMatchObject({
      title: null,
      summary: 'planned a trip',
      metadata: { channel: 'web', tags: ['a'] },
    });
    expect(await sessions.patch(session.id, {})).toEqual(summarized);
    expect(await sessions.patch('missing', { title: 'x' })).toBeUndefined();
  });

  it('lists most recently active first, by agent, with paging', async () => {
    const a = await sessions.ensureActive('agent:main:a', 'main');
    const b = await sessions.ensureActive('agent:main:b', 'main');
    const c = await sessions.ensureActive('agent:helper:c', 'helper');
    await sessions.touch(a.id, { at: 3_000 });
    await sessions.touch(c.id, { at: 2_000 });
    await sessions.touch(b.id, { at: 1_500 });
    expect((await sessions.list()).map((session) => session.id)).toEqual([a.id, c.id, b.id]);
    expect((await sessions.list({ agentId: 'main' })).map((session) => session.id)).toEqual([a.id, b.id]);
    expect((await sessions.list({ limit: 1, offset: 1 })).map((session) => session.id)).toEqual([c.id]);
  });

  it('deletes every instance of a key', async () => {
    await sessions.ensureActive('agent:main:main', 'main');
    await sessions.archive('agent:main:main', 'new');
    await sessions.ensureActive('agent:main:main', 'main');
    await sessions.ensureActive('agent:main:other', 'main');
    expect(await sessions.delete('agent:main:main')).toBe(2);
    expect(await sessions.delete('agent:main:main')).toBe(0);
    expect((await sessions.list({ includeArchived: true })).map((session) => session.sessionKey)).toEqual([
      'agent:main:other',
    ]);
  });
});
