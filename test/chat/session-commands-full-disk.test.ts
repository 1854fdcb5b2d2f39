import { expect, it } from 'vitest';
import { createBus } from '../../src/bus/index.js';
import { createChatService } from '../../src/chat/index.js';
import { createIdentityLoader } from '../../src/identity/index.js';
import { createMemoryService } from '../../src/memory/index.js';
import { createSessionStore, type SqlDatabase } from '../../src/store/index.js';
import { createSequentialIdGenerator } from '../../src/util/index.js';
import { inboxOn } from '../helpers/chat-inbox.js';
import { answerTurn } from '../helpers/chat-turn.js';
import { describeEachDatabase } from '../helpers/databases.js';
import { createFaultyDatabase } from '../helpers/faulty-database.js';
import { tempHome } from '../runtime/helpers.js';

const sessionKey = 'agent:main:main';
const agentId = 'main';

/** The chat service on a database whose writes can fail like a full disk; memory retries after `writeRetryMs`. */
function chatOnFaulty(getDb: () => SqlDatabase, writeRetryMs = 5) {
  const faulty = createFaultyDatabase(getDb());
  const bus = createBus();
  const memory = createMemoryService({
    db: faulty,
    bus,
    config: { writeRetryMs, maxWriteRetryMs: writeRetryMs * 4 },
  });
  const sessions = createSessionStore(faulty);
  const chat = createChatService({
    sessions,
    inbox: inboxOn(faulty),
    memory,
    identity: createIdentityLoader({ workspaceDir: tempHome('agentd-identity-') }),
    bus,
    autoRecall: false,
    idGenerator: createSequentialIdGenerator(),
    runTurn: answerTurn,
  });
  const recovered = () => new Promise<void>((resolve) => bus.on('memory:recovered', () => resolve()));
  return { faulty, memory, sessions, chat, recovered };
}

/** What a restart reads: a fresh store and memory on the same database. */
const stored = async (db: SqlDatabase) => ({
  transcript: (
    await createMemoryService({ db, bus: createBus() }).history(sessionKey, { includeArchived: true })
  ).map((entry) => entry.content),
  session: await createSessionStore(db).getActive(sessionKey),
  archivedEntries: Number(
    (
      await db.get<{ count: number }>(
        'SELECT COUNT(*) AS count FROM memory_entries WHERE session_key = ? AND archived_at_ms IS NOT NULL',
        [sessionKey],
      )
    )?.count,
  ),
});

describeEachDatabase('session commands on a full disk', (getDb) => {
  it('refuses an injected message it cannot store, rather than answering a MemoryID kept in RAM', async () => {
    const { faulty, memory, chat, recovered } = chatOnFaulty(getDb);
    await chat.inject({ sessionKey, agentId, role: 'assistant', text: 'stored' });
    const before = await stored(getDb());
    const back = recovered();

    faulty.failWrites();
    await expect(
      chat.inject({ sessionKey, agentId, role: 'assistant', text: 'while full' }),
    ).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE', retryable: true });
    // Nothing waits in RAM to be written later, so nothing shows up after the disk is back.
    expect(memory.status().pendingWrites).toBe(0);
    faulty.heal();
    await back;
    expect((await stored(getDb())).transcript).toEqual(['stored']);

    // Sent again, it is stored with the session's count, in the one commit.
    const { memoryId } = await chat.inject({ sessionKey, agentId, role: 'assistant', text: 'again' });
    expect(memoryId).toBe(`${sessionKey}#2`);
    const after = await stored(getDb());
    expect(after.transcript).toEqual(['stored', 'again']);
    expect(after.session?.messageCount).toBe(before.session!.messageCount + 1);
  });

  it('refuses a reset that archives when the disk is full, leaving the session and its memory as they were', async () => {
    const { faulty, chat, recovered } = chatOnFaulty(getDb);
    await chat.inject({ sessionKey, agentId, role: 'assistant', text: 'remember me' });
    const before = await stored(getDb());
    const back = recovered();

    faulty.failWrites();
    await expect(chat.reset({ sessionKey, agentId, reason: 'reset', archive: true })).rejects.toMatchObject({
      code: 'STORE_UNAVAILABLE',
    });
    faulty.heal();
    await back;
    const refused = await stored(getDb());
    expect(refused.session?.id).toBe(before.session!.id);
    expect(refused.archivedEntries).toBe(0);

    const reset = await chat.reset({ sessionKey, agentId, reason: 'reset', archive: true });
    expect(reset).toMatchObject({ previousSessionId: before.session!.id, archived: true });
    const after = await stored(getDb());
    expect(after.session?.id).toBe(reset.sessionId);
    expect(after.archivedEntries).toBe(1);
  });

  it('does not answer archived while the memory waits in RAM after the disk came back', async () => {
    // The retry is far off: the reset comes while the write the full disk refused is still queued.
    const { faulty, memory, chat, recovered } = chatOnFaulty(getDb, 400);
    await chat.inject({ sessionKey, agentId, role: 'assistant', text: 'stored' });
    const ref = { sessionKey, agentId, sessionId: (await stored(getDb())).session!.id };
    faulty.failWrites();
    await memory.append(ref, { role: 'user', content: 'queued while full' });
    expect(memory.status().pendingWrites).toBe(1);
    faulty.heal();
    const back = recovered();

    await expect(chat.reset({ sessionKey, agentId, reason: 'reset', archive: true })).rejects.toMatchObject({
      code: 'STORE_UNAVAILABLE',
      retryable: true,
    });
    expect((await stored(getDb())).session?.id).toBe(ref.sessionId);

    await back;
    expect(await chat.reset({ sessionKey, agentId, reason: 'reset', archive: true })).toMatchObject({
      archived: true,
    });
    const after = await stored(getDb());
    expect(after.transcript).toEqual(['stored', 'queued while full']);
    expect(after.archivedEntries).toBe(2);
  });

  it('refuses a compaction it cannot store, summarizing nothing', async () => {
    const { faulty, memory, chat, recovered } = chatOnFaulty(getDb);
    const back = recovered();
    for (const text of ['one', 'two', 'three', 'four'])
      await chat.inject({ sessionKey, agentId, role: 'assistant', text });
    const ref = { sessionKey, agentId, sessionId: (await stored(getDb())).session!.id };

    faulty.failWrites();
    await expect(chat.compact({ sessionKey, agentId })).rejects.toMatchObject({
      code: 'STORE_UNAVAILABLE',
    });
    expect(memory.status().pendingWrites).toBe(0);
    expect((await memory.load(ref)).map((entry) => entry.kind)).toEqual(['entry', 'entry', 'entry', 'entry']);
    faulty.heal();
    await back;

    expect(await chat.compact({ sessionKey, agentId })).toMatchObject({ compacted: true });
    expect((await memory.load(ref)).map((entry) => entry.kind)).toContain('summary');
  });
});

describeEachDatabase('deleting a session key', (getDb) => {
  it('drops its writes still queued from a full disk, so the retry does not bring the transcript back', async () => {
    const { faulty, memory, chat, recovered } = chatOnFaulty(getDb, 300);
    await chat.inject({ sessionKey, agentId, role: 'assistant', text: 'stored' });
    const ref = { sessionKey, agentId, sessionId: (await stored(getDb())).session!.id };
    faulty.failWrites();
    await memory.append(ref, { role: 'user', content: 'queued while full' });
    faulty.heal();
    const back = recovered();

    await memory.deleteSessionKey(sessionKey);
    await back;
    expect(memory.status().pendingWrites).toBe(0);
    expect((await stored(getDb())).transcript).toEqual([]);
    expect(await memory.history(sessionKey)).toEqual([]);
  });
});
