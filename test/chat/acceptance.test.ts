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

function chatOn(db: SqlDatabase, runTurn: typeof answerTurn = answerTurn) {
  const bus = createBus();
  const finished: string[] = [];
  bus.on('run:finished', (event) => finished.push(event.data.runId));
  const memory = createMemoryService({ db, bus, config: { writeRetryMs: 5, maxWriteRetryMs: 20 } });
  const chat = createChatService({
    sessions: createSessionStore(db),
    inbox: inboxOn(db),
    memory,
    identity: createIdentityLoader({ workspaceDir: tempHome('agentd-identity-') }),
    bus,
    autoRecall: false,
    idGenerator: createSequentialIdGenerator(),
    runTurn,
  });
  const send = (text: string, idempotencyKey: string) =>
    chat.send({ sessionKey, agentId: 'main', text, idempotencyKey });
  return { chat, bus, memory, finished, send };
}

const storedHistory = async (db: SqlDatabase) =>
  (await createMemoryService({ db, bus: createBus() }).history(sessionKey)).map((entry) => entry.content);

describeEachDatabase('a message its idle session takes at once', (getDb) => {
  it('is in the transcript with its run marked running before the acknowledgement, never in the inbox', async () => {
    let endTurn!: () => void;
    const turnMayEnd = new Promise<void>((resolve) => {
      endTurn = resolve;
    });
    const { chat, send } = chatOn(getDb(), async (input) => {
      await turnMayEnd;
      return answerTurn(input);
    });
    const inbox = inboxOn(getDb());
    expect(await send('hello', 'run-1')).toEqual({ runId: 'run-1', status: 'started' });

    // What a crash right after the acknowledgement would leave: the message stored, the run interrupted.
    expect(await storedHistory(getDb())).toEqual(['hello']);
    expect(await inbox.list()).toEqual([]);
    expect((await inbox.listRunning()).map((run) => run.runId)).toEqual(['run-1']);

    endTurn();
    expect((await chat.wait('run-1')).status).toBe('completed');
    expect(await storedHistory(getDb())).toEqual(['hello', 'answer']);
    expect(await inbox.listRunning()).toEqual([]);
  });

  it('is refused when it cannot be stored, leaves no run behind, and is taken when sent again', async () => {
    const faulty = createFaultyDatabase(getDb());
    const { chat, bus, memory, finished, send } = chatOn(faulty);
    await send('first', 'run-1');
    expect((await chat.wait('run-1')).status).toBe('completed');

    faulty.failWrites();
    const recovered = new Promise<void>((resolve) => bus.on('memory:recovered', () => resolve()));
    await expect(send('while full', 'run-2')).rejects.toMatchObject({
      code: 'STORE_UNAVAILABLE',
      retryable: true,
    });
    expect(faulty.refused).toBeGreaterThan(0);
    // Refused means not kept anywhere: no record, no events, nothing queued to be written later.
    expect(chat.get('run-2')).toBeUndefined();
    expect(chat.activeRuns()).toEqual([]);
    // The turns here publish nothing themselves: an event would come from the failed turn.
    expect(finished).toEqual([]);
    expect(memory.status()).toMatchObject({ degraded: true, pendingWrites: 0 });
    expect((await memory.history(sessionKey)).map((entry) => entry.content)).toEqual(['first', 'answer']);

    faulty.heal();
    await recovered;
    expect(await send('while full', 'run-2')).toEqual({ runId: 'run-2', status: 'started' });
    expect((await chat.wait('run-2')).status).toBe('completed');
    expect(await storedHistory(getDb())).toEqual(['first', 'answer', 'while full', 'answer']);
    expect(await inboxOn(getDb()).list()).toEqual([]);
    expect(await inboxOn(getDb()).listRunning()).toEqual([]);
  });
});
