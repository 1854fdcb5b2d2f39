import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Runtime } from '../../src/runtime.js';
import { findOpenClaw, jsonOf, runOpenClaw } from '../helpers/openclaw.js';
import { startRuntime } from './helpers.js';

const { bin, reason } = findOpenClaw();
if (!bin) console.log(`skipping the openclaw CLI test against the full runtime: ${reason}`);
const timeoutMs = 90_000;

describe.skipIf(!bin)('the real openclaw CLI against the whole agentd runtime (SQLite, local model)', () => {
  let runtime: Runtime;
  let url: string;
  let home: string;

  beforeAll(async () => {
    const started = await startRuntime();
    runtime = started.runtime;
    url = started.url;
    home = mkdtempSync(join(tmpdir(), 'agentd-openclaw-home-'));
  });
  afterAll(async () => {
    await runtime?.close();
    if (home) rmSync(home, { recursive: true, force: true });
  });

  const call = (method: string, params: unknown, extra: string[] = []) =>
    runOpenClaw(
      bin as string,
      [
        'gateway',
        'call',
        method,
        '--url',
        url,
        '--token',
        runtime.state.token,
        '--json',
        '--params',
        JSON.stringify(params),
        ...extra,
      ],
      {
        home,
        timeoutMs,
      },
    );

  it(
    'chats, remembers and answers through gateway call and openclaw agent',
    async () => {
      const health = jsonOf(await call('health', {}));
      expect(health).toMatchObject({ status: 'ok', store: { mode: 'sqlite' } });

      const ack = jsonOf(
        await call(
          'chat.send',
          { sessionKey: 'agent:main:oc', message: 'My cat is called Pixel.', idempotencyKey: 'oc-1' },
          ['--expect-final'],
        ),
      );
      expect(ack).toMatchObject({ runId: 'oc-1' });
      await runtime.chat.wait('oc-1');
      const history = jsonOf(await call('chat.history', { sessionKey: 'agent:main:oc', limit: 10 }));
      expect(history.messages.map((message: { role: string }) => message.role)).toEqual([
        'user',
        'assistant',
      ]);

      const env = { OPENCLAW_GATEWAY_URL: url, OPENCLAW_GATEWAY_TOKEN: runtime.state.token };
      const answer = await runOpenClaw(
        bin as string,
        ['agent', '--session-key', 'agent:main:oc', '--message', 'What is my cat called?'],
        {
          home,
          env,
          timeoutMs,
        },
      );
      expect(answer).toContain('Pixel');
      expect(answer).toContain('[local model]');
    },
    timeoutMs * 3,
  );
});
