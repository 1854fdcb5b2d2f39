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
