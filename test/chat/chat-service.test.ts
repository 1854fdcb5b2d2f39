import { describe, expect, it } from 'vitest';
import { createBus } from '../../src/bus/index.js';
import { type ChatService, createChatService } from '../../src/chat/index.js';
import { createIdentityLoader } from '../../src/identity/index.js';
import { createMemoryService, type MemoryService } from '../../src/memory/index.js';
import { createSessionStore, type SqlDatabase } from '../../src/store/index.js';
import { createManualClock, createSequentialIdGenerator } from '../../src/util/index.js';
import { inboxOn } from '../helpers/chat-inbox.js';
import { answerTurn } from '../helpers/chat-turn.js';
import { countingCommits } from '../helpers/commit-counter.js';
import { describeEachDatabase } from '../helpers/databases.js';
import { tempHome } from '../runtime/helpers.js';

const sessionKey = 'agent:main:main';

function chatOn(
  db: SqlDatabase,
  extra: { memory?: MemoryService; recallRefreshMs?: number; clock?: ReturnType<typeof createManualClock> },
): ChatService {
  const bus = createBus();
  return createChatService({
    sessions: createSessionStore(db),
    inbox: inboxOn(db),
    memory: extra.memory ?? createMemoryService({ db, bus }),
    identity: createIdentityLoader({ workspaceDir: tempHome('agentd-identity-') }),
    bus,
    autoRecall: extra.recallRefreshMs !== undefined,
    ...(extra.recallRefreshMs !== undefined ? { recallRefreshMs: extra.recallRefreshMs } : {}),
    ...(extra.clock ? { clock: extra.clock } : {}),
    idGenerator: createSequentialIdGenerator(),
    runTurn: answerTurn,
  });
}

async function turn(chat: ChatService, text: string, runId: string) {
  await chat.send({ sessionKey, agentId: 'main', text, idempotencyKey: runId });
  return chat.wait(runId);
}

describeEachDatabase('chat service writes', (getDb) => {
  it('commits a turn twice: the message with the start of its run, the reply with its end', async () => {
    const counting = countingCommits(getDb());
    const chat = chatOn(counting.db, {});
    expect((await turn(chat, 'first', 'run-1')).status).toBe('completed');
    const before = counting.count();
    expect((await turn(chat, 'second', 'run-2')).status).toBe('completed');
    expect(counting.count() - before).toBe(2);

    const inbox = inboxOn(getDb());
    expect(await inbox.list()).toEqual([]);
    expect(await inbox.listRunning()).toEqual([]);
    const session = await createSessionStore(getDb()).getActive(sessionKey);
    expect(session?.messageCount).toBe(4);
    const history = await createMemoryService({ db: getDb(), bus: createBus() }).history(sessionKey);
    expect(history.map((entry) => entry.content)).toEqual(['first', 'answer', 'second', 'answer']);
  });
});

describe('chat service automatic recall', () => {
  it('searches for each new message and reuses a recall for the same text sent again within recallRefreshMs', async () => {
    const { createMemoryStore } = await import('../../src/store/index.js');
    const store = await createMemoryStore();
    const clock = createManualClock();
    const real = createMemoryService({ db: store.db, bus: createBus() });
    const queries: string[] = [];
    const memory: MemoryService = Object.create(real);
    memory.recallForPrompt = (options) => {
      queries.push(options.query);
      return real.recallForPrompt(options);
    };
    const chat = chatOn(store.db, { memory, recallRefreshMs: 1_000, clock });
    await turn(chat, 'alpha question', 'r1');
    clock.advance(500);
    await turn(chat, 'beta question', 'r2');
    expect(queries).toEqual(['alpha question', 'beta question']);
    clock.advance(500);
    await turn(chat, 'beta question', 'r3');
    expect(queries).toEqual(['alpha question', 'beta question']);
    clock.advance(600);
    await turn(chat, 'beta question', 'r4');
    expect(queries).toEqual(['alpha question', 'beta question', 'beta question']);
    await store.close();
  });

  it('searches on every turn without recallRefreshMs', async () => {
    const { createMemoryStore } = await import('../../src/store/index.js');
    const store = await createMemoryStore();
    const real = createMemoryService({ db: store.db, bus: createBus() });
    const queries: string[] = [];
    const memory: MemoryService = Object.create(real);
    memory.recallForPrompt = (options) => {
      queries.push(options.query);
      return real.recallForPrompt(options);
    };
    const chat = chatOn(store.db, { memory, recallRefreshMs: 0 });
    await turn(chat, 'alpha question', 'r1');
    await turn(chat, 'beta question', 'r2');
    expect(queries).toEqual(['alpha question', 'beta question']);
    await store.close();
  });
});

describeEachDatabase('chat service after a restart', (getDb) => {
  it("answers a key sent again while the start still reads what the last process left, with its run's end", async () => {
    const before = chatOn(getDb(), {});
    expect((await turn(before, 'first', 'run-1')).status).toBe('completed');

    const real = createMemoryService({ db: getDb(), bus: createBus() });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const memory: MemoryService = Object.create(real);
    memory.recentMessageMarks = async (options) => {
      await gate;
      return real.recentMessageMarks(options);
    };
    const after = chatOn(getDb(), { memory });
    const resumed = after.resumePending();
    let answered = false;
    const again = after
      .send({ sessionKey, agentId: 'main', text: 'first', idempotencyKey: 'run-1' })
      .then((ack) => {
        answered = true;
        return ack;
      });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(answered).toBe(false);
    release();
    expect(await again).toMatchObject({ runId: 'run-1', status: 'ended', record: { status: 'completed' } });
    expect(await resumed).toEqual([]);
    expect((await after.wait('run-1')).text).toBe('answer');
    expect((await real.history(sessionKey)).map((entry) => entry.content)).toEqual(['first', 'answer']);
  });
});
