import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { OperatorScopes } from '../../src/gateway/index.js';
import { connectOpenClaw, startTestGateway, type TestGateway } from './helpers.js';

// What a method of an OpenClaw connection is told about its caller: what the connect negotiated, and a signal
// that aborts when the connection closes, also when the method first asks for it after the close.
describe('the method context of an OpenClaw connection', () => {
  let gateway: TestGateway | undefined;
  afterEach(async () => {
    await gateway?.close();
    gateway = undefined;
  });

  it('carries the scopes and client the connect negotiated, and the method table enforces those scopes', async () => {
    gateway = await startTestGateway({
      setup: (table) =>
        table.register('test.context', {
          scopes: [OperatorScopes.read],
          params: z.looseObject({}),
          handler: async (_params, context) => ({
            scopes: [...context.scopes],
            clientId: context.clientInfo.id,
            clientMode: context.clientInfo.mode,
          }),
        }),
    });
    const { client, response } = await connectOpenClaw(gateway.url, {
      scopes: [OperatorScopes.read],
      client: { id: 'context-probe', version: '1.0.0', platform: 'linux', mode: 'cli' },
    });
    expect(response.ok).toBe(true);
    const seen = await client.request('test.context', {});
    expect(seen.payload).toEqual({
      scopes: [OperatorScopes.read],
      clientId: 'context-probe',
      clientMode: 'cli',
    });
    const refused = await client.request('chat.send', {
      sessionKey: 'agent:main:main',
      message: 'hello',
      idempotencyKey: 'context-write',
    });
    expect(refused.ok).toBe(false);
    expect(refused.error.details).toMatchObject({ missingScope: OperatorScopes.write });
    client.close();
  });

  it('aborts the signal of a method in flight when the connection closes, and of one that asks after', async () => {
    let inFlight: AbortSignal | undefined;
    let askedLate: (() => boolean) | undefined;
    let releaseLate!: () => void;
    const late = new Promise<void>((resolve) => {
      releaseLate = resolve;
    });
    gateway = await startTestGateway({
      setup: (table) => {
        table.register('test.hold', {
          scopes: [OperatorScopes.read],
          params: z.looseObject({}),
          handler: async (_params, context) => {
            inFlight = context.signal;
            await new Promise<void>((resolve) => context.signal.addEventListener('abort', () => resolve()));
            return { aborted: true };
          },
        });
        table.register('test.late', {
          scopes: [OperatorScopes.read],
          params: z.looseObject({}),
          handler: async (_params, context) => {
            await late;
            askedLate = () => context.signal.aborted;
            return {};
          },
        });
      },
    });
    const { client } = await connectOpenClaw(gateway.url);
    client.send({ type: 'req', id: 'hold', method: 'test.hold', params: {} });
    client.send({ type: 'req', id: 'late', method: 'test.late', params: {} });
    await expect.poll(() => inFlight).toBeDefined();
    expect(inFlight!.aborted).toBe(false);
    client.ws.terminate();
    await client.closed;
    await expect.poll(() => inFlight!.aborted).toBe(true);
    releaseLate();
    await expect.poll(() => askedLate).toBeDefined();
    expect(askedLate!()).toBe(true);
  });
});
