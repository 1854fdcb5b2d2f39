import { hostname } from 'node:os';
import { expect, it } from 'vitest';
import { createBus } from '../../src/bus/index.js';
import { type ChatInbox, createChatService, type PendingMessage } from '../../src/chat/index.js';
import { createIdentityLoader } from '../../src/identity/index.js';
import { createMemoryService } from '../../src/memory/index.js';
import { createKvStore, createSessionStore, type SqlDatabase } from '../../src/store/index.js';
import {
  AgentdError,
  addAbortListener,
  closeOwner,
  createSequentialIdGenerator,
  openOwner,
} from '../../src/util/index.js';
import { inboxOn } from '../helpers/chat-inbox.js';
import { answerTurn } from '../helpers/chat-turn.js';
import { describeEachDatabase } from '../helpers/databases.js';
import { tempHome } from '../runtime/helpers.js';

/** The test inbox, with the single-message read the runtime's inbox has. */
function inboxWithGet(db: SqlDatabase): ChatInbox {
  const kv = createKvStore(db);
  return {
    ...inboxOn(db),
    get: async (runId) => {
      const value = await kv.get('inbox', runId);
      return value === undefined ? undefined : (JSON.parse(value) as PendingMessage);
    },
  };
}

/**
 * A chat service on `db` whose model turns hang until `release()` (an aborted one ends at once, as the
 * engage loop does), with small queue bounds.
 */
function hangingChat(
  db: SqlDatabase,
  bounds: { maxQueuedTurnsPerSession: number; maxQueuedTurns: number },
  inbox: ChatInbox = inboxWithGet(db),
) {
  let release!: () => void;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  const started: string[] = [];
  const chat = createChatService({
    sessions: createSessionStore(db),
    inbox,
    memory: createMemoryService({ db, bus: createBus() }),
    identity: createIdentityLoader({ workspaceDir: tempHome('agentd-identity-') }),
    bus: createBus(),
    autoRecall: false,
    idGenerator: createSequentialIdGenerator(),
    ...bounds,
    runTurn: async (input) => {
      started.push(input.runId);
      if (!input.signal.aborted)
        await Promise.race([
          released,
          new Promise<void>((resolve) => addAbortListener(input.signal, resolve)),
        ]);
      if (input.signal.aborted) {
        const aborted = {
          status: 'aborted' as const,
          text: '',
          newMessages: [],
          usage: { inputTokens: 0, outputTokens: 0 },
          turns: 0,
          activeSkills: [],
          compactions: 0,
        };
        await input.beforeFinish(aborted);
        return aborted;
      }
      return answerTurn(input);
    },
  });
  const send = (sessionKey: string, text: string, idempotencyKey: string) =>
    chat.send({ sessionKey, agentId: 'main', text, idempotencyKey });
  return { chat, send, release, started };
}

async function refusal(promise: Promise<unknown>): Promise<AgentdError> {
  const error = await promise.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  if (!AgentdError.isInstance(error)) throw new Error(`expected an AgentdError, got ${String(error)}`);
  return error;
}

const pendingIds = async (inbox: ChatInbox) => (await inbox.list()).map((message) => message.runId).sort();
const a = 'agent:main:a';
const b = 'agent:main:b';
const c = 'agent:main:c';

describeEachDatabase('chat turns waiting behind a running turn', (getDb) => {
  it('are bounded per session: one more is refused with QUEUE_FULL and leaves nothing behind', async () => {
    const inbox = inboxWithGet(getDb());
    const { chat, send, release } = hangingChat(getDb(), { maxQueuedTurnsPerSession: 2, maxQueuedTurns: 10 });
    await send(a, 'running', 'run-0');
    await send(a, 'queued 1', 'run-1');
    await send(a, 'queued 2', 'run-2');
    expect(await pendingIds(inbox)).toEqual(['run-1', 'run-2']);

    const error = await refusal(send(a, 'one too many', 'run-3'));
    expect(error.toJSON()).toMatchObject({ code: 'QUEUE_FULL', retryable: true });
    expect(error.message).toContain('chat.maxQueuedTurnsPerSession is 2');
    // Refused before anything was written: no inbox row, no live run, no record for the key.
    expect(await pendingIds(inbox)).toEqual(['run-1', 'run-2']);
    expect(chat.get('run-3')).toBeUndefined();
    expect(chat.activeRuns().map((run) => run.runId)).toEqual(['run-0', 'run-1', 'run-2']);
    // A command waits in the queue like a message, so it is refused too.
    expect((await refusal(send(a, '/compact', 'run-4'))).code).toBe('QUEUE_FULL');

    // The key of a queued message is answered with its run, not refused and not counted again.
    expect(await send(a, 'queued 1', 'run-1')).toEqual({ runId: 'run-1', status: 'in_flight' });
    // Another session is not held up by this one's queue.
    expect(await send(b, 'elsewhere', 'run-b')).toEqual({ runId: 'run-b', status: 'started' });

    release();
    for (const runId of ['run-0', 'run-1', 'run-2', 'run-b'])
      expect((await chat.wait(runId)).status).toBe('completed');
    // Room again once the queue drained; the refused key may be sent again.
    expect(await send(a, 'one too many', 'run-3')).toEqual({ runId: 'run-3', status: 'started' });
    expect((await chat.wait('run-3')).status).toBe('completed');
    expect(await pendingIds(inbox)).toEqual([]);
  });

  it('count commands sent at once to an idle session while the first is still being written', async () => {
    const inbox = inboxWithGet(getDb());
    const { chat, send, release } = hangingChat(getDb(), { maxQueuedTurnsPerSession: 2, maxQueuedTurns: 10 });
    // Commands go through the inbox: none has started a turn when the others arrive.
    const answers = await Promise.allSettled(
      ['c-0', 'c-1', 'c-2', 'c-3', 'c-4'].map((runId) => send(c, '/compact', runId)),
    );
    const refused = answers.filter(
      (answer) => answer.status === 'rejected' && (answer.reason as AgentdError).code === 'QUEUE_FULL',
    );
    // Each counts from its inbox write until its turn starts, so two are taken and the rest refused.
    expect(answers.map((answer) => answer.status)).toEqual([
      'fulfilled',
      'fulfilled',
      'rejected',
      'rejected',
      'rejected',
    ]);
    expect(refused).toHaveLength(3);
    for (const runId of ['c-2', 'c-3', 'c-4']) expect(chat.get(runId)).toBeUndefined();
    release();
    for (const runId of ['c-0', 'c-1']) expect((await chat.wait(runId)).status).toBe('completed');
    expect(await pendingIds(inbox)).toEqual([]);
  });

  it('are bounded across sessions; a message its idle session starts at once is not queued', async () => {
    const inbox = inboxWithGet(getDb());
    const { chat, send, release } = hangingChat(getDb(), { maxQueuedTurnsPerSession: 2, maxQueuedTurns: 3 });
    await send(a, 'running', 'a-0');
    await send(a, 'queued', 'a-1');
    await send(a, 'queued', 'a-2');
    await send(b, 'running', 'b-0');
    await send(b, 'queued', 'b-1');

    const error = await refusal(send(b, 'over the total', 'b-2'));
    expect(error.toJSON()).toMatchObject({ code: 'QUEUE_FULL', retryable: true });
    expect(error.message).toContain('chat.maxQueuedTurns is 3');
    expect(chat.get('b-2')).toBeUndefined();
    expect(await pendingIds(inbox)).toEqual(['a-1', 'a-2', 'b-1']);
    expect(await send(c, 'idle session', 'c-0')).toEqual({ runId: 'c-0', status: 'started' });

    release();
    for (const runId of ['a-0', 'a-1', 'a-2', 'b-0', 'b-1', 'c-0'])
      expect((await chat.wait(runId)).status).toBe('completed');
  });

  it('never refuse /stop: it aborts the running turn and empties the queue', async () => {
    const inbox = inboxWithGet(getDb());
    const { chat, send, release } = hangingChat(getDb(), { maxQueuedTurnsPerSession: 2, maxQueuedTurns: 10 });
    await send(a, 'running', 'run-0');
    await send(a, 'queued 1', 'run-1');
    await send(a, 'queued 2', 'run-2');
    expect((await refusal(send(a, 'full', 'run-3'))).code).toBe('QUEUE_FULL');

    expect(await send(a, '/stop', 'stop-1')).toEqual({ runId: 'stop-1', status: 'started' });
    expect((await chat.wait('stop-1')).text).toBe('Stopped 3 run(s).');
    for (const runId of ['run-0', 'run-1', 'run-2']) expect((await chat.wait(runId)).status).toBe('aborted');
    expect(await pendingIds(inbox)).toEqual([]);
    expect(await send(a, 'after the stop', 'run-3')).toEqual({ runId: 'run-3', status: 'started' });
    release();
    expect((await chat.wait('run-3')).status).toBe('completed');
  });

  it('resume at start within the bounds and take the rest from the inbox as queued turns start', async () => {
    const inbox = inboxWithGet(getDb());
    // Left by an older build without bounds: five messages for one session, one for another.
    const backlog = ['a-1', 'a-2', 'a-3', 'a-4', 'a-5'];
    for (const [index, runId] of backlog.entries())
      await inbox.put({
        runId,
        sessionKey: a,
        agentId: 'main',
        text: `message ${index + 1}`,
        receivedAt: index + 1,
      });
    await inbox.put({ runId: 'b-1', sessionKey: b, agentId: 'main', text: 'other', receivedAt: 10 });

    const { chat, release, started } = hangingChat(getDb(), {
      maxQueuedTurnsPerSession: 2,
      maxQueuedTurns: 10,
    });
    // a-1 starts at once, a-2 and a-3 fill the session's queue; a-4 and a-5 stay in the inbox.
    expect(await chat.resumePending()).toEqual(['a-1', 'a-2', 'a-3', 'b-1']);
    expect(chat.get('a-4')).toBeUndefined();
    expect(chat.get('a-5')).toBeUndefined();
    expect(await pendingIds(inbox)).toEqual(expect.arrayContaining(['a-4', 'a-5']));

    release();
    for (const runId of [...backlog, 'b-1']) expect((await chat.wait(runId)).status).toBe('completed');
    // In arrival order within the session, each once.
    expect(started.filter((runId) => runId.startsWith('a-'))).toEqual(backlog);
    expect(await pendingIds(inbox)).toEqual([]);
    const history = await createMemoryService({ db: getDb(), bus: createBus() }).history(a);
    expect(history.filter((entry) => entry.role === 'user').map((entry) => entry.content)).toEqual(
      backlog.map((_, index) => `message ${index + 1}`),
    );
  });

  it('resume at start within the bounds and leave the rest for the next start without ChatInbox.get', async () => {
    const inbox = inboxOn(getDb());
    for (const index of [1, 2, 3, 4])
      await inbox.put({
        runId: `a-${index}`,
        sessionKey: a,
        agentId: 'main',
        text: `m${index}`,
        receivedAt: index,
      });
    const first = hangingChat(getDb(), { maxQueuedTurnsPerSession: 1, maxQueuedTurns: 10 }, inbox);
    expect(await first.chat.resumePending()).toEqual(['a-1', 'a-2']);
    first.release();
    for (const runId of ['a-1', 'a-2']) expect((await first.chat.wait(runId)).status).toBe('completed');
    expect(await pendingIds(inbox)).toEqual(['a-3', 'a-4']);

    const next = hangingChat(getDb(), { maxQueuedTurnsPerSession: 1, maxQueuedTurns: 10 }, inbox);
    expect(await next.chat.resumePending()).toEqual(['a-3', 'a-4']);
    next.release();
    for (const runId of ['a-3', 'a-4']) expect((await next.chat.wait(runId)).status).toBe('completed');
  });
});

describeEachDatabase('waiting for a chat run', (getDb) => {
  it('takes a timeout past 2^31 - 1 ms as the longest timer, not as 1 ms', async () => {
    const { chat, send, release } = hangingChat(getDb(), { maxQueuedTurnsPerSession: 2, maxQueuedTurns: 10 });
    await send(a, 'running', 'run-0');
    const outcome = await Promise.race([
      chat.wait('run-0', { timeoutMs: 2 ** 31 + 10 }).then(
        () => 'finished',
        (error: unknown) => (AgentdError.isInstance(error) ? error.code : 'failed'),
      ),
      new Promise<string>((resolve) => setTimeout(() => resolve('still waiting'), 50)),
    ]);
    expect(outcome).toBe('still waiting');
    // A wait that times out is refused with TIMEOUT and the run goes on.
    await expect(chat.wait('run-0', { timeoutMs: 5 })).rejects.toMatchObject({ code: 'TIMEOUT' });
    release();
    expect((await chat.wait('run-0')).status).toBe('completed');
  });
});

describeEachDatabase('a start beside another process of this host on the same database', (getDb) => {
  it("leaves the runs and waiting messages of an owner that may be alive, and takes a gone one's", async () => {
    const db = getDb();
    const inbox = inboxWithGet(db);
    const sessions = createSessionStore(db);
    const memory = createMemoryService({ db, bus: createBus() });
    // A process of this host still serving (open in this test's process), one whose process is gone (no such
    // pid), one of another host, and an agentd from before owners were written.
    const alive = openOwner();
    const owners: Record<string, string | undefined> = {
      alive,
      gone: `${hostname()}/4194305/gone`,
      elsewhere: 'another-host/1/elsewhere',
      unnamed: undefined,
    };
    try {
      for (const [name, owner] of Object.entries(owners)) {
        const session = await sessions.ensureActive(`agent:main:${name}`, 'main');
        const ref = { sessionId: session.id, sessionKey: session.sessionKey, agentId: 'main' };
        await memory.append(ref, {
          role: 'user',
          content: `${name} asks`,
          metadata: { runId: `run-${name}` },
        });
        await sessions.markRunning(session.id, {
          runId: `run-${name}`,
          startedAt: 1,
          ...(owner ? { owner } : {}),
        });
        await createKvStore(db).set(
          'inbox',
          `wait-${name}`,
          JSON.stringify({
            runId: `wait-${name}`,
            sessionKey: `agent:main:waiting-${name}`,
            agentId: 'main',
            text: `${name} waits`,
            receivedAt: 2,
            ...(owner ? { owner } : {}),
          }),
        );
      }
      const { chat, release } = hangingChat(db, { maxQueuedTurnsPerSession: 4, maxQueuedTurns: 100 }, inbox);
      expect((await chat.resumePending()).sort()).toEqual(['wait-elsewhere', 'wait-gone', 'wait-unnamed']);
      release();
      for (const name of ['gone', 'elsewhere', 'unnamed']) {
        expect(await chat.wait(`run-${name}`)).toMatchObject({
          status: 'error',
          error: { code: 'RUN_INTERRUPTED' },
        });
        expect((await chat.wait(`wait-${name}`)).status).toBe('completed');
      }
      // The live owner's run is still its own: marked, not ended, and its message still waiting for it.
      await expect(chat.wait('run-alive')).rejects.toMatchObject({ code: 'NOT_FOUND' });
      expect((await sessions.listRunning()).map((run) => [run.runId, run.owner])).toEqual([
        ['run-alive', alive],
      ]);
      expect(await pendingIds(inbox)).toEqual(['wait-alive']);
      // Once that owner is gone, the next start takes them.
      closeOwner(alive);
      const next = hangingChat(db, { maxQueuedTurnsPerSession: 4, maxQueuedTurns: 100 }, inbox);
      expect(await next.chat.resumePending()).toEqual(['wait-alive']);
      next.release();
      expect(await next.chat.wait('run-alive')).toMatchObject({ error: { code: 'RUN_INTERRUPTED' } });
      expect((await next.chat.wait('wait-alive')).status).toBe('completed');
    } finally {
      closeOwner(alive);
    }
  });
});
