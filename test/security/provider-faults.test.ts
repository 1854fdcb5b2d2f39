import { writeFileSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { GatewayClient } from '../../src/cli/gateway-client.js';
import type { Runtime } from '../../src/runtime.js';
import {
  type FakeOpenAIServer,
  openAIStreamFrames,
  startFakeOpenAIServer,
} from '../helpers/fake-openai-server.js';
import { collectRun, startRuntime, tempHome } from '../runtime/helpers.js';

type Fault = 'rate-limited' | 'server-error' | 'hang' | 'broken-stream' | 'ok';

describe('a provider that fails: rate limits, 5xx, timeouts, a stream cut midway', () => {
  let server: FakeOpenAIServer | undefined;
  let runtime: Runtime | undefined;
  let client: GatewayClient | undefined;
  afterEach(async () => {
    await client?.close();
    await runtime?.close();
    await server?.close();
    client = undefined;
    runtime = undefined;
    server = undefined;
  });

  it('ends each run with a clear provider error and leaves the session consistent for the next turn', async () => {
    server = await startFakeOpenAIServer();
    let fault: Fault = 'ok';
    const hanging: ServerResponse[] = [];
    const handle = (response: ServerResponse) => {
      switch (fault) {
        case 'rate-limited':
          response.writeHead(429, { 'content-type': 'application/json', 'retry-after': '0' });
          response.end(JSON.stringify({ error: { message: 'slow down', type: 'rate_limit_exceeded' } }));
          return;
        case 'server-error':
          response.writeHead(503, { 'content-type': 'application/json' });
          response.end(JSON.stringify({ error: { message: 'overloaded', type: 'server_error' } }));
          return;
        case 'hang':
          response.writeHead(200, { 'content-type': 'text/event-stream' });
          hanging.push(response);
          return;
        case 'broken-stream': {
          response.writeHead(200, { 'content-type': 'text/event-stream' });
          const [first] = openAIStreamFrames({ text: ['half a rep'] });
          response.write(first!);
          response.socket?.destroy();
          return;
        }
        case 'ok':
          response.writeHead(200, { 'content-type': 'text/event-stream' });
          for (const frame of openAIStreamFrames({ text: ['back ', 'again'] })) response.write(frame);
          response.end();
      }
    };
    server.respond(
      ...Array.from({ length: 40 }, () => ({
        type: 'handler' as const,
        handle: (_request: unknown, response: ServerResponse) => handle(response),
      })),
    );

    const home = tempHome('agentd-provider-faults-');
    writeFileSync(join(home, 'agentd.yaml'), 'engage:\n  model_timeout_ms: 300\n');
    const started = await startRuntime({
      home,
      env: { OPENAI_BASE_URL: server.baseURL, AGENTD_MODEL: 'openai/faulty-model' },
    });
    runtime = started.runtime;
    client = await started.connect();

    const run = async (text: string, runId: string) => {
      const done = collectRun(client!, runId);
      await client!.call('chat.send', {
        sessionKey: 'agent:main:main',
        message: text,
        idempotencyKey: runId,
      });
      const final = (await done).at(-1)!.payload;
      const waited = await client!.call<{ status: string; error?: { code: string; retryable: boolean } }>(
        'agent.wait',
        { runId },
      );
      return { state: final.state as string, error: waited.error };
    };

    const outcomes: Record<string, unknown> = {};
    for (const [index, current] of (
      ['rate-limited', 'server-error', 'hang', 'broken-stream'] as const
    ).entries()) {
      fault = current;
      outcomes[current] = await run(`question ${index}`, `run-${current}`);
    }
    for (const response of hanging) response.destroy();
    expect(outcomes).toEqual({
      'rate-limited': {
        state: 'error',
        error: expect.objectContaining({ code: 'PROVIDER_RATE_LIMITED', retryable: true }),
      },
      'server-error': {
        state: 'error',
        error: expect.objectContaining({ code: 'PROVIDER_UNAVAILABLE', retryable: true }),
      },
      hang: { state: 'error', error: expect.objectContaining({ code: 'PROVIDER_TIMEOUT', retryable: true }) },
      'broken-stream': { state: 'error', error: expect.objectContaining({ retryable: true }) },
    });
    expect((outcomes['broken-stream'] as { error: { code: string } }).error.code).toMatch(/^PROVIDER_/);

    fault = 'ok';
    expect(await run('still there?', 'run-ok')).toEqual({ state: 'final', error: undefined });

    // Failed turns keep the user's message and write no half reply; nothing is left pending or running.
    const history = await client.call<{ messages: Array<{ role: string; content: unknown }> }>(
      'chat.history',
      {
        sessionKey: 'agent:main:main',
      },
    );
    expect(history.messages.map((message) => message.role)).toEqual([
      'user',
      'user',
      'user',
      'user',
      'user',
      'assistant',
    ]);
    expect(JSON.stringify(history.messages.at(-1)!.content)).toContain('back again');
    expect(await runtime.store.kv.list('chat-inbox')).toEqual([]);
    expect(await runtime.store.kv.list('chat-running')).toEqual([]);
  });
});
