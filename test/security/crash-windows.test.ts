import { afterEach, describe, expect, it } from 'vitest';
import { createBus } from '../../src/bus/index.js';
import { type ChatInbox, createChatService, type PendingMessage } from '../../src/chat/index.js';
import { createIdentityLoader } from '../../src/identity/index.js';
import { createMemoryService } from '../../src/memory/index.js';
import type { Runtime } from '../../src/runtime.js';
import { createKvStore, createSessionStore, createStore } from '../../src/store/index.js';
import { createScriptedModel } from '../../src/testing.js';
import { createSequentialIdGenerator } from '../../src/util/index.js';
import { answerTurn } from '../helpers/chat-turn.js';
import { describeEachDatabase } from '../helpers/databases.js';
import { startRuntime, tempHome } from '../runtime/helpers.js';

describeEachDatabase('a chat message between the inbox and the transcript', (getDb) => {
  it('is never both in the transcript and still pending, even when the dequeue fails', async () => {
    const db = getDb();
    const kv = createKvStore(db);
    let failNextDelete = true;
    // The dequeue's statement fails as a full disk fails it, after the append's went out: the append must not
    // be stored without it. On Postgres it fails in the database, as such failures do (the transaction's COMMIT
    // may have been sent with the statements already); SQLite runs each statement when it is issued.
    const inbox: ChatInbox = {
      put: (message) => kv.set('inbox', message.runId, JSON.stringify(message)),
      delete: async (runId, tx) => {
        if (failNextDelete) {
          failNextDelete = false;
          const executor = tx ?? db;
          if (executor.dialect === 'postgres')
            await executor.run(
              "DO $$ BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = '53100'; END $$",
            );
          else throw Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
        }
        await kv.delete('inbox', runId, tx);
      },
      list: async () => (await kv.list('inbox')).map((entry) => JSON.parse(entry.value) as PendingMessage),
      markRunning: (run, tx) => createSessionStore(db).markRunning(run.sessionId, run, run.activity, tx),
      markEnded: (run, tx) => createSessionStore(db).markEnded(run.sessionKey, run.runId, run.activity, tx),
      markEndedWithoutReply: (run, tx) => createSessionStore(db).markEndedWithoutReply(run, tx),
      listRunning: () => createSessionStore(db).listRunning(),
      listUnreplied: () => createSessionStore(db).listUnrepliedRuns(),
    };
    const bus = createBus();
    const memory = createMemoryService({ db, bus, config: { writeRetryMs: 5, maxWriteRetryMs: 20 } });
    const chat = createChatService({
      sessions: createSessionStore(db),
      inbox,
      memory,
      identity: createIdentityLoader({ workspaceDir: tempHome('agentd-identity-') }),
      bus,
      autoRecall: false,
      idGenerator: createSequentialIdGenerator(),
      runTurn: async (input) => {
        await firstTurnMayEnd;
        return answerTurn(input);
      },
    });
    let endFirstTurn!: () => void;
    const firstTurnMayEnd = new Promise<void>((resolve) => {
      endFirstTurn = resolve;
    });
    const recovered = new Promise<void>((resolve) => bus.on('memory:recovered', () => resolve()));
    const send = (text: string, idempotencyKey: string) =>
      chat.send({ sessionKey: 'agent:main:main', agentId: 'main', text, idempotencyKey });
    // Only a message that waits behind a running turn passes through the inbox.
    await send('busy', 'run-0');
    await send('hello once', 'run-1');
    expect((await inbox.list()).map((message) => message.runId)).toEqual(['run-1']);
    endFirstTurn();
    expect((await chat.wait('run-1')).status).toBe('completed');
    expect(failNextDelete).toBe(false);
    await recovered;

    // What a restart would find: the message once in the transcript, nothing left to replay.
    const fresh = createMemoryService({ db, bus: createBus() });
    const history = await fresh.history('agent:main:main');
    expect(history.map((entry) => entry.content)).toEqual(['busy', 'answer', 'hello once', 'answer']);
    expect(await inbox.list()).toEqual([]);
    expect(await inbox.listRunning()).toEqual([]);
  });
});

describe('a turn cut off by a crash', () => {
  let runtime: Runtime | undefined;
  afterEach(async () => {
    await runtime?.close();
    runtime = undefined;
  });

  it('ends with an error final for its run id after the restart, never silence', async () => {
    const home = tempHome('agentd-interrupted-');
    // The state a kill -9 in the middle of a turn leaves: the message in the transcript, the run marked running.
    const store = await createStore({ stateDir: home });
    const session = await store.sessions.ensureActive('agent:main:main', 'main');
    const memory = createMemoryService({ db: store.db, bus: createBus() });
    await memory.append(
      { sessionId: session.id, sessionKey: 'agent:main:main', agentId: 'main' },
      { role: 'user', content: 'cut off', metadata: { runId: 'run-cut' } },
    );
    await store.sessions.markRunning(session.id, { runId: 'run-cut', startedAt: 1 });
    await store.close();

    const model = createScriptedModel({ steps: [] });
    const started = await startRuntime({ home, model });
    runtime = started.runtime;
    const record = await runtime.chat.wait('run-cut');
    expect(record).toMatchObject({
      status: 'error',
      error: { code: 'RUN_INTERRUPTED', retryable: true },
    });
    // Asked over the wire, as a reconnecting client would.
    const client = await started.connect();
    try {
      const waited = await client.call<{ status: string; error: { code: string } }>('agent.wait', {
        runId: 'run-cut',
      });
      expect(waited).toMatchObject({ status: 'error', error: { code: 'RUN_INTERRUPTED' } });
      // Sent again under its key, it is answered with that end, not run (nor left waiting as in flight).
      const again = await client.call<Record<string, unknown>>('chat.send', {
        sessionKey: 'agent:main:main',
        message: 'cut off',
        idempotencyKey: 'run-cut',
      });
      expect(again).toMatchObject({
        runId: 'run-cut',
        status: 'error',
        cached: true,
        error: { code: 'RUN_INTERRUPTED' },
      });
      const history = await client.call<{ messages: Array<{ role: string; content: unknown }> }>(
        'chat.history',
        { sessionKey: 'agent:main:main' },
      );
      expect(history.messages.map((message) => message.role)).toEqual(['user', 'assistant']);
      expect(JSON.stringify(history.messages[1]!.content)).toContain('agentd stopped before this reply');
    } finally {
      await client.close();
    }
    expect(await runtime.store.kv.list('chat-running')).toEqual([]);
    // Not run again: its tools may have acted already.
    model.assertAllConsumed();
    expect(model.requests).toHaveLength(0);
  });
});
