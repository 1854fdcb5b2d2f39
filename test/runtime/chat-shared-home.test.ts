import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import type { Runtime } from '../../src/runtime.js';
import { createScriptedModel } from '../../src/testing.js';
import { startRuntime, tempHome } from './helpers.js';

const started: Runtime[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((runtime) => runtime.close()));
});

it('a second server started on the same state leaves the first one’s running turn and waiting message to it', async () => {
  const home = tempHome();
  const first = await startRuntime({
    home,
    model: createScriptedModel({
      steps: [{ text: 'First answer.', delayMs: 500 }, { text: 'Second answer.' }],
    }),
  });
  started.push(first.runtime);
  const send = (text: string, idempotencyKey: string) =>
    first.runtime.chat.send({ sessionKey: 'agent:main:main', agentId: 'main', text, idempotencyKey });
  await send('First message.', 'm-1');
  // Behind the running turn: it waits in the durable inbox.
  await send('Second message.', 'm-2');

  // Its start ends what it takes for a crash's leftovers; a model with no steps would fail any turn it ran.
  const second = await startRuntime({ home, model: createScriptedModel({ steps: [] }) });
  started.push(second.runtime);

  expect(await first.runtime.chat.wait('m-1')).toMatchObject({ status: 'completed', text: 'First answer.' });
  expect(await first.runtime.chat.wait('m-2')).toMatchObject({ status: 'completed', text: 'Second answer.' });
  const entries = await first.runtime.store.db.all<{ role: string; content: string }>(
    "SELECT role, content FROM memory_entries WHERE content NOT LIKE '[evicted:%' ORDER BY id",
  );
  expect(entries.map((entry) => `${entry.role}: ${entry.content}`)).toEqual([
    'user: First message.',
    'assistant: First answer.',
    'user: Second message.',
    'assistant: Second answer.',
  ]);
});

const databaseNow = "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)";

it('leaves another host’s running turn and waiting message while its lease holds, and takes them once it lapsed', async () => {
  const home = tempHome();
  writeFileSync(join(home, 'agentd.yaml'), 'chat:\n  ownerLeaseMs: 300\n');
  // What a process of another host sharing the database left: a running turn, a waiting message, and its
  // lease, fresh by the database's clock.
  const other = 'another-host/4242/other';
  const lease = (runtime: Runtime, forMs: number) =>
    runtime.store.db.run(
      `INSERT INTO chat_owners (owner_id, alive_until) VALUES (?, ${databaseNow} + ?) ON CONFLICT (owner_id) DO UPDATE SET alive_until = excluded.alive_until`,
      [other, forMs],
    );
  const before = await startRuntime({ home, model: createScriptedModel({ steps: [] }) });
  const session = await before.runtime.store.sessions.ensureActive('agent:main:main', 'main');
  const ref = { sessionId: session.id, sessionKey: session.sessionKey, agentId: 'main' };
  await before.runtime.memory.append(ref, {
    role: 'user',
    content: 'Theirs.',
    metadata: { runId: 'theirs-1' },
  });
  await before.runtime.store.sessions.markRunning(session.id, {
    runId: 'theirs-1',
    startedAt: 1,
    owner: other,
  });
  const waiting = {
    runId: 'theirs-2',
    sessionKey: 'agent:main:waiting',
    agentId: 'main',
    text: 'Still waiting.',
  };
  await before.runtime.store.kv.set(
    'chat-inbox',
    'theirs-2',
    JSON.stringify({ ...waiting, receivedAt: 2, owner: other }),
  );
  await lease(before.runtime, 60_000);
  await before.runtime.close();

  const { runtime } = await startRuntime({
    home,
    model: createScriptedModel({ steps: [{ text: 'Answered here.' }] }),
  });
  started.push(runtime);
  // Its start left both to their owner, and so do the sweeps while the lease holds.
  await new Promise((resolve) => setTimeout(resolve, 400));
  expect(runtime.chat.get('theirs-1')).toBeUndefined();
  expect(runtime.chat.get('theirs-2')).toBeUndefined();
  expect((await runtime.store.sessions.listRunning()).map((run) => run.runId)).toEqual(['theirs-1']);

  // The lease lapses (that host stopped without giving it up): a sweep takes both.
  await lease(runtime, -1);
  for (let tries = 0; tries < 100 && !runtime.chat.get('theirs-2'); tries++)
    await new Promise((resolve) => setTimeout(resolve, 50));
  expect(await runtime.chat.wait('theirs-1')).toMatchObject({
    status: 'error',
    error: { code: 'RUN_INTERRUPTED' },
  });
  expect(await runtime.chat.wait('theirs-2')).toMatchObject({ status: 'completed', text: 'Answered here.' });
  expect(await runtime.store.db.all('SELECT owner_id FROM chat_owners WHERE owner_id = ?', [other])).toEqual(
    [],
  );
});
