import { describe, expect, it } from 'vitest';
import type { GatewayClient } from '../../src/cli/gateway-client.js';
import { configFrom, parsePortOption, parsePositiveInt } from '../../src/cli/options.js';
import { remoteTurn, sessionKeyFor } from '../../src/cli/remote.js';

/** A gateway client that answers `chat.send` with the given chat events for the sent run. */
function fakeClient(events: (runId: string) => Array<Record<string, unknown>>, fail?: Error) {
  let handler: ((event: string, payload: unknown) => void) | undefined;
  const sent: unknown[] = [];
  const client = {
    onEvent(next: (event: string, payload: unknown) => void) {
      handler = next;
      return () => {
        handler = undefined;
      };
    },
    async call(method: string, params: { idempotencyKey: string }) {
      sent.push({ method, params });
      if (fail) throw fail;
      queueMicrotask(() => {
        handler?.('chat', { runId: 'someone-else', state: 'final' });
        for (const payload of events(params.idempotencyKey)) handler?.('chat', payload);
      });
      return {};
    },
  } as unknown as GatewayClient;
  return { client, sent };
}

describe('CLI options and remote turns', () => {
  it('parses ports and positive integers, refusing anything else with INVALID_REQUEST', () => {
    expect(parsePortOption('0')).toBe(0);
    expect(parsePortOption('7777')).toBe(7777);
    for (const bad of ['-1', '65536', '1.5', 'http']) {
      expect(() => parsePortOption(bad)).toThrow(expect.objectContaining({ code: 'INVALID_REQUEST' }));
    }
    const timeout = parsePositiveInt('--timeout-ms');
    expect(timeout('250')).toBe(250);
    expect(() => timeout('0')).toThrow('--timeout-ms must be a positive integer, got "0"');
  });

  it('names sessions of an agent', () => {
    expect(sessionKeyFor('main', undefined)).toBe('agent:main:main');
    expect(sessionKeyFor('main', 'work')).toBe('agent:main:work');
    expect(sessionKeyFor('main', 'agent:other:x')).toBe('agent:other:x');
  });

  it('streams the deltas of its own run and resolves with the final text', async () => {
    const { client, sent } = fakeClient((runId) => [
      { runId, state: 'delta', deltaText: 'Hel' },
      { runId, state: 'delta', deltaText: 'lo' },
      { runId, state: 'final', message: { content: [{ text: 'Hel' }, { text: 'lo' }] } },
    ]);
    const deltas: string[] = [];
    const result = await remoteTurn(client, 'agent:main:main', 'hi', 10_000, (delta) => deltas.push(delta));
    expect(result).toMatchObject({ status: 'completed', text: 'Hello' });
    expect(deltas).toEqual(['Hel', 'lo']);
    expect(sent).toEqual([
      {
        method: 'chat.send',
        params: { sessionKey: 'agent:main:main', message: 'hi', idempotencyKey: result.runId },
      },
    ]);
  });

  it('reports a failed run, and rejects when the gateway refuses the message', async () => {
    const { client } = fakeClient((runId) => [
      { runId, state: 'error', errorKind: 'PROVIDER_ERROR', errorMessage: 'boom' },
    ]);
    expect(await remoteTurn(client, 'agent:main:main', 'hi', 10_000, () => {})).toMatchObject({
      status: 'error',
      error: { code: 'PROVIDER_ERROR', message: 'boom' },
    });
    const refused = fakeClient(() => [], new Error('not allowed'));
    await expect(remoteTurn(refused.client, 'agent:main:main', 'hi', 10_000, () => {})).rejects.toThrow(
      'not allowed',
    );
  });

  it('applies --log-level over the quiet default of one-shot commands, and refuses an unknown level', async () => {
    expect((await configFrom({}, {}, true)).logLevel).toBe('warn');
    expect((await configFrom({ logLevel: 'debug' }, {}, true)).logLevel).toBe('debug');
    expect((await configFrom({ logLevel: 'silent' })).logLevel).toBe('silent');
    await expect(configFrom({ logLevel: 'loud' })).rejects.toThrow(/--log-level must be one of fatal, error/);
  });
});
