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
import { tempHome } from '../runtime/helpers.js';

/** Records the options of every transaction `db` opens from now on. */
function recordTransactions(db: SqlDatabase): Array<{ ambient?: boolean } | undefined> {
  const seen: Array<{ ambient?: boolean } | undefined> = [];
  const open = db.transaction.bind(db);
  db.transaction = (work, options) => {
    seen.push(options);
    return open(work, options);
  };
  return seen;
}

describeEachDatabase('the transactions of a chat turn', (getDb) => {
  // An ambient transaction makes Node run a hook on every promise of the process while it is open; a chat
  // server at load always has one open (docs/storage.md, "What a commit costs").
  it('are none of them ambient: the message, the reply, a message that waited in the inbox', async () => {
    const db = getDb();
    const bus = createBus();
    const chat = createChatService({
      sessions: createSessionStore(db),
      inbox: inboxOn(db),
      memory: createMemoryService({ db, bus, config: { maxActiveEntries: 4 } }),
      identity: createIdentityLoader({ workspaceDir: tempHome('agentd-identity-') }),
      bus,
      autoRecall: false,
      idGenerator: createSequentialIdGenerator(),
      runTurn: answerTurn,
    });
    const send = (text: string, idempotencyKey: string) =>
      chat.send({ sessionKey: 'agent:main:main', agentId: 'main', text, idempotencyKey });
    // The session's first turn creates its records; the turns after it are the ones a server repeats.
    await send('first', 'run-0');
    expect((await chat.wait('run-0')).status).toBe('completed');
    const seen = recordTransactions(db);
    await send('second', 'run-1');
    // Sent while run-1 may still run: it waits in the inbox and moves to the transcript in its own commit.
    await send('third', 'run-2');
    for (const runId of ['run-1', 'run-2']) expect((await chat.wait(runId)).status).toBe('completed');
    for (let turn = 3; turn < 6; turn++) {
      // Past the memory limit of 4 entries: these replies evict in their commits.
      await send(`turn ${turn}`, `run-${turn}`);
      expect((await chat.wait(`run-${turn}`)).status).toBe('completed');
    }
    // Two commits a turn at least (the message, the reply), plus the full-text index's batches. On Postgres
    // each of a turn's commits is one statement that no transaction wraps (test/memory/commit-round-trips).
    if (db.dialect === 'sqlite') expect(seen.length).toBeGreaterThanOrEqual(10);
    else expect(seen).toEqual([]);
    expect(seen.filter((options) => options?.ambient !== false)).toEqual([]);
    const history = await createMemoryService({ db, bus: createBus() }).history('agent:main:main');
    expect(history.filter((entry) => entry.role === 'user').map((entry) => entry.content)).toEqual([
      'first',
      'second',
      'third',
      'turn 3',
      'turn 4',
      'turn 5',
    ]);
  });
});
