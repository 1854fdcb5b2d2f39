import { afterEach, describe, expect, it } from 'vitest';
import type { GatewayClient } from '../../src/cli/gateway-client.js';
import type { LanguageModel } from '../../src/model/index.js';
import type { Runtime } from '../../src/runtime.js';
import { createManualClock } from '../../src/util/index.js';
import { collectRun, startRuntime, tempHome } from './helpers.js';

const sessionKey = 'agent:main:main';

/** Every call answers nothing: a turn that completes and stores no reply. */
const silentModel = {
  specificationVersion: 'v1',
  provider: 'test',
  modelId: 'silent',
  contextWindowTokens: 8_000,
  async *doStream() {
    yield { type: 'usage', usage: { inputTokens: 1, outputTokens: 0 } };
    yield { type: 'finish', stopReason: 'end_turn' };
  },
} as unknown as LanguageModel;

/** Every call fails: a turn that stores the user message and no reply. */
const failingModel = {
  specificationVersion: 'v1',
  provider: 'test',
  modelId: 'failing',
  contextWindowTokens: 8_000,
  async *doStream() {
    yield { type: 'error', error: { code: 'PROVIDER_ERROR', message: 'boom', retryable: false } };
  },
} as unknown as LanguageModel;

describe('chat.send idempotency keys across a restart', () => {
  let runtime: Runtime | undefined;
  let client: GatewayClient | undefined;
  afterEach(async () => {
    await client?.close();
    await runtime?.close();
    client = undefined;
    runtime = undefined;
  });

  async function start(home: string, options: Parameters<typeof startRuntime>[0] = {}) {
    await client?.close();
    await runtime?.close();
    const started = await startRuntime({ home, ...options });
    runtime = started.runtime;
    client = await started.connect();
    return client;
  }

  const send = (connected: GatewayClient, message: string, idempotencyKey: string) =>
    connected.call<Record<string, unknown>>('chat.send', { sessionKey, message, idempotencyKey });

  async function turn(connected: GatewayClient, message: string, idempotencyKey: string) {
    const done = collectRun(connected, idempotencyKey);
    expect(await send(connected, message, idempotencyKey)).toEqual({
      runId: idempotencyKey,
      status: 'started',
    });
    return (await done).at(-1)!.payload;
  }

  const userMessages = async (connected: GatewayClient) =>
    (
      await connected.call<{ messages: Array<{ role: string; content: unknown }> }>('chat.history', {
        sessionKey,
        limit: 1000,
      })
    ).messages
      .filter((message) => message.role === 'user')
      .map((message) => message.content);

  it('answers a key whose run ended before the restart with how it ended, and runs nothing again', async () => {
    const home = tempHome();
    let connected = await start(home);
    expect((await turn(connected, 'My cat is called Pixel.', 'answered-1')).state).toBe('final');
    connected = await start(home, { model: failingModel });
    expect((await turn(connected, 'This one fails.', 'failed-1')).state).toBe('error');
    connected = await start(home, { model: silentModel });
    expect((await turn(connected, 'Say nothing.', 'silent-1')).state).toBe('final');

    connected = await start(home);
    expect(await send(connected, 'My cat is called Pixel.', 'answered-1')).toEqual({
      runId: 'answered-1',
      status: 'ok',
      cached: true,
    });
    // How the runs without a reply ended is on their session's row: the model's own error, and an answer of
    // nothing, which is no error.
    expect(await send(connected, 'This one fails.', 'failed-1')).toMatchObject({
      runId: 'failed-1',
      status: 'error',
      cached: true,
      error: { code: 'PROVIDER_ERROR', message: expect.stringContaining('boom') },
    });
    expect(await send(connected, 'Say nothing.', 'silent-1')).toEqual({
      runId: 'silent-1',
      status: 'ok',
      cached: true,
    });
    expect(await connected.call('agent.wait', { runId: 'silent-1' })).toMatchObject({
      runId: 'silent-1',
      status: 'ok',
    });
    // Asked again, the gateway's own cache answers the same.
    expect(await send(connected, 'My cat is called Pixel.', 'answered-1')).toMatchObject({
      status: 'ok',
      cached: true,
    });
    expect(await userMessages(connected)).toEqual([
      'My cat is called Pixel.',
      'This one fails.',
      'Say nothing.',
    ]);

    // agent.wait knows the run too, with its reply's text read back from the transcript.
    const waited = await connected.call<Record<string, unknown>>('agent.wait', { runId: 'answered-1' });
    expect(waited).toMatchObject({ runId: 'answered-1', status: 'ok', memoryId: expect.any(String) });
    expect(String(waited.text)).not.toBe('');
  }, 60_000);

  it('answers a chat.inject sent again under its key with the note already written, also after a restart', async () => {
    const home = tempHome();
    let connected = await start(home);
    // The second key's note is a system one: both roles are read back.
    const inject = (message: string, idempotencyKey?: string) =>
      connected.call<{ ok: boolean; memoryId: string }>('chat.inject', {
        sessionKey,
        message,
        ...(idempotencyKey ? { idempotencyKey } : {}),
        ...(idempotencyKey === 'note-2' ? { role: 'system' } : {}),
      });
    const first = await inject('Build 41 is out.', 'note-1');
    expect(await inject('Build 41 is out.', 'note-1')).toEqual(first);
    const [left, right] = await Promise.all([
      inject('Twice at once.', 'note-2'),
      inject('Twice at once.', 'note-2'),
    ]);
    expect(left).toEqual(right);
    // Without a key every call is a note of its own.
    await inject('No key.');
    await inject('No key.');

    connected = await start(home);
    expect(await inject('Build 41 is out.', 'note-1')).toEqual(first);
    expect(await inject('Twice at once.', 'note-2')).toEqual(left);
    // Counted in the database: chat.history leaves system entries out.
    const stored = async (content: string) =>
      (await runtime!.store.db.all('SELECT 1 FROM memory_entries WHERE content = ?', [content])).length;
    expect(await stored('Build 41 is out.')).toBe(1);
    expect(await stored('Twice at once.')).toBe(1);
    expect(await stored('No key.')).toBe(2);
  }, 60_000);

  it('runs a key again once its run ended longer ago than the window (10 minutes)', async () => {
    const home = tempHome();
    let connected = await start(home);
    expect((await turn(connected, 'Hello there.', 'old-1')).state).toBe('final');
    connected = await start(home, { clock: createManualClock(Date.now() + 10 * 60_000 + 1_000) });
    expect((await turn(connected, 'Hello there.', 'old-1')).state).toBe('final');
    expect(await userMessages(connected)).toEqual(['Hello there.', 'Hello there.']);
  }, 60_000);
});
