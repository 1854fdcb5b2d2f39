import { generateKeyPairSync, sign } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { verifyDeviceBlock } from '../../src/gateway/device-auth.js';
import { createDedupeCache } from '../../src/gateway/idempotency.js';
import {
  acceptedThenFinal,
  createMethodTable,
  deviceAuthPayload,
  deviceIdForPublicKey,
  isAsyncResult,
  resolveSessionKey,
  scopeSatisfied,
} from '../../src/gateway/index.js';
import { AgentdError, createManualClock } from '../../src/util/index.js';
import { testMethodContext } from './helpers.js';

const context = testMethodContext;

async function rejection(promise: Promise<unknown>): Promise<AgentdError> {
  const error = await promise.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  if (!AgentdError.isInstance(error)) throw new Error(`expected an AgentdError, got ${String(error)}`);
  return error;
}

describe('method table', () => {
  const table = createMethodTable();
  table.register('echo', {
    scopes: ['operator.write'],
    params: z.object({ text: z.string(), count: z.number().int().default(1) }),
    handler: async (params) => params.text.repeat(params.count),
  });

  it('validates params with zod and runs the handler', async () => {
    await expect(table.invoke('echo', { text: 'ab', count: 2 }, context(['operator.write']))).resolves.toBe(
      'abab',
    );
    const error = await rejection(table.invoke('echo', { text: 5 }, context(['operator.write'])));
    expect(error.code).toBe('INVALID_REQUEST');
    expect(error.message).toMatch(/^invalid echo params: text:/);
    expect(error.details?.issues).toEqual([{ path: ['text'], message: expect.any(String) }]);
  });

  it('refuses callers without the scope, naming it', async () => {
    const error = await rejection(table.invoke('echo', { text: 'a' }, context(['operator.read'])));
    expect(error.code).toBe('FORBIDDEN');
    expect(error.details).toMatchObject({ code: 'MISSING_SCOPE', missingScope: 'operator.write' });
    await expect(table.invoke('echo', { text: 'a' }, context(['operator.admin']))).resolves.toBe('a');
  });

  it('answers unknown methods the way OpenClaw does', async () => {
    const error = await rejection(table.invoke('no.such.method', {}, context(['operator.admin'])));
    expect(error.code).toBe('INVALID_REQUEST');
    expect(error.message).toBe('unknown method: no.such.method');
    expect(error.details).toMatchObject({ code: 'UNKNOWN_METHOD' });
  });

  it('lists methods and declared events, and refuses duplicates', () => {
    table.declareEvents(['chat']);
    table.forwardBusEvent('agent:plan', 'agent.plan', { spiderweb: 'legacy' });
    expect(table.list()).toEqual(['echo']);
    expect(table.events()).toEqual(['agent.plan', 'chat']);
    expect(() => table.register('echo', { scopes: [], params: z.object({}), handler: () => 1 })).toThrow(
      /already/,
    );
    expect(() => table.forwardBusEvent('agent:plan', 'agent.plan')).toThrow(/already/);
  });

  it('marks two-phase results', () => {
    const result = acceptedThenFinal({ status: 'accepted' }, Promise.resolve({ status: 'ok' }));
    expect(isAsyncResult(result)).toBe(true);
    expect(isAsyncResult({ accepted: 1, final: Promise.resolve() })).toBe(false);
  });
});

describe('scopes', () => {
  it('apply OpenClaw implications', () => {
    expect(scopeSatisfied('operator.read', ['operator.write'])).toBe(true);
    expect(scopeSatisfied('operator.write', ['operator.read'])).toBe(false);
    expect(scopeSatisfied('operator.admin', ['operator.write'])).toBe(false);
    expect(scopeSatisfied('operator.pairing', ['operator.admin'])).toBe(true);
    expect(scopeSatisfied('operator.sessions.read', ['operator.read'])).toBe(true);
    expect(scopeSatisfied('operator.read', ['operator.sessions.read'])).toBe(false);
  });
});

describe('session keys', () => {
  it('resolves short keys to the default agent and keeps full keys', () => {
    expect(resolveSessionKey('main')).toEqual({ sessionKey: 'agent:main:main', agentId: 'main' });
    expect(resolveSessionKey('work', 'coder')).toEqual({ sessionKey: 'agent:coder:work', agentId: 'coder' });
    expect(resolveSessionKey('agent:dev:t5:extra')).toEqual({
      sessionKey: 'agent:dev:t5:extra',
      agentId: 'dev',
    });
  });

  it.each([
    '',
    'agent:',
    'agent::x',
    'agent:dev:',
    'cron:job',
    'a\u0000b',
    'agent:bad id:x',
    'x'.repeat(300),
  ])('refuses %j', (key) => {
    expect(() => resolveSessionKey(key)).toThrow(/invalid session key/);
  });
});

describe('idempotency cache', () => {
  it('reports in-flight keys, caches outcomes for the TTL, and bounds finished entries', () => {
    const clock = createManualClock();
    const cache = createDedupeCache({ ttlMs: 1000, maxEntries: 2, clock });
    cache.begin('a', 'run-a');
    expect(cache.get('a')).toMatchObject({ state: 'in_flight', runId: 'run-a' });
    cache.finish('a', { status: 'ok' });
    expect(cache.get('a')).toMatchObject({ state: 'done', result: { status: 'ok' } });
    clock.advance(1000);
    expect(cache.get('a')).toBeUndefined();
    for (const key of ['b', 'c', 'd']) {
      cache.begin(key, key);
      cache.finish(key, {});
    }
    cache.begin('live', 'live');
    expect(cache.get('b')).toBeUndefined();
    expect(cache.get('c')?.state).toBe('done');
    expect(cache.get('live')?.state).toBe('in_flight');
    expect(cache.size).toBe(3);
  });

  it('evicts past the bound in the order runs finished, not the order they began', () => {
    const clock = createManualClock();
    const cache = createDedupeCache({ ttlMs: 60_000, maxEntries: 100, clock });
    for (let index = 0; index < 300; index++) cache.begin(`k${index}`, `run-${index}`);
    // Finished newest first: the runs that began first finish last and are the last to go.
    for (let index = 299; index >= 0; index--) cache.finish(`k${index}`, { index });
    expect(cache.size).toBe(100);
    expect(cache.get('k99')).toMatchObject({ state: 'done', result: { index: 99 } });
    expect(cache.get('k0')).toMatchObject({ state: 'done', result: { index: 0 } });
    expect(cache.get('k100')).toBeUndefined();
    expect(cache.get('k299')).toBeUndefined();
  });

  it('keeps counting right through keys forgotten, begun again after expiry and finished twice', () => {
    const clock = createManualClock();
    const cache = createDedupeCache({ ttlMs: 1_000, maxEntries: 50, clock });
    for (let round = 0; round < 40; round++) {
      for (let index = 0; index < 100; index++) {
        const key = `r${round}-${index}`;
        cache.begin(key, key);
        if (index % 3 === 0) cache.forget(key);
        else cache.finish(key, { first: true });
        // A second outcome for the same key replaces the first, and is evicted as one entry.
        if (index % 5 === 0) cache.finish(key, { first: false });
      }
      clock.advance(400);
    }
    // Only the newest 50 finished keys of the last round are left, with their latest outcome.
    expect(cache.size).toBe(50);
    const kept = Array.from({ length: 100 }, (_, index) => `r39-${index}`).filter(
      (key) => cache.get(key) !== undefined,
    );
    expect(kept).toHaveLength(50);
    expect(kept.every((key) => Number(key.split('-')[1]) % 3 !== 0)).toBe(true);
    expect(cache.get('r39-70')).toMatchObject({ result: { first: false } });
    // Begun again after its outcome expired, a key is in flight once more and then finished anew.
    clock.advance(1_000);
    expect(cache.get('r39-98')).toBeUndefined();
    cache.begin('r39-98', 'again');
    expect(cache.get('r39-98')).toMatchObject({ state: 'in_flight', runId: 'again' });
    cache.finish('r39-98', { again: true });
    expect(cache.get('r39-98')).toMatchObject({ state: 'done', runId: 'again', result: { again: true } });
    expect(cache.size).toBe(1);
  });
});

describe('device auth', () => {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const raw = publicKey.export({ format: 'der', type: 'spki' }).subarray(-32);
  const deviceId = deviceIdForPublicKey(raw);
  const base = {
    deviceId,
    clientId: 'cli',
    clientMode: 'cli',
    role: 'operator',
    scopes: ['operator.read'],
    signedAtMs: 1_700_000_000_000,
    token: 'tok',
    nonce: 'n-1',
    platform: 'Linux',
    deviceFamily: 'Desktop',
  };

  it('builds the v3 and v2 payload strings', () => {
    expect(deviceAuthPayload('v3', base)).toBe(
      `v3|${deviceId}|cli|cli|operator|operator.read|1700000000000|tok|n-1|linux|desktop`,
    );
    expect(deviceAuthPayload('v2', base)).toBe(
      `v2|${deviceId}|cli|cli|operator|operator.read|1700000000000|tok|n-1`,
    );
  });

  const verifyWith = (overrides: Record<string, unknown> = {}, signVersion: 'v2' | 'v3' = 'v3') => {
    const signature = sign(null, Buffer.from(deviceAuthPayload(signVersion, base)), privateKey).toString(
      'base64url',
    );
    return verifyDeviceBlock({
      device: {
        id: deviceId,
        publicKey: raw.toString('base64url'),
        signature,
        signedAt: base.signedAtMs,
        nonce: 'n-1',
      },
      challengeNonce: 'n-1',
      nowMs: base.signedAtMs + 1000,
      clientId: 'cli',
      clientMode: 'cli',
      role: 'operator',
      scopes: ['operator.read'],
      tokens: ['tok'],
      platform: 'Linux',
      deviceFamily: 'Desktop',
      ...overrides,
    });
  };

  it('accepts a v3 or v2 signature over the challenge', () => {
    expect(verifyWith()).toEqual({ ok: true });
    expect(verifyWith({}, 'v2')).toEqual({ ok: true });
  });

  it('names what is wrong', () => {
    expect(verifyWith({ challengeNonce: 'other' })).toMatchObject({ code: 'DEVICE_AUTH_NONCE_MISMATCH' });
    expect(verifyWith({ nowMs: base.signedAtMs + 3_600_000 })).toMatchObject({
      code: 'DEVICE_AUTH_SIGNATURE_EXPIRED',
    });
    expect(verifyWith({ scopes: ['operator.admin'] })).toMatchObject({
      code: 'DEVICE_AUTH_SIGNATURE_INVALID',
    });
    const good = verifyWith;
    expect(
      good({
        device: { id: 'x', publicKey: 'short', signature: 'x', signedAt: base.signedAtMs, nonce: 'n-1' },
      }),
    ).toMatchObject({
      code: 'DEVICE_AUTH_PUBLIC_KEY_INVALID',
    });
    expect(
      good({
        device: {
          id: 'f'.repeat(64),
          publicKey: raw.toString('base64url'),
          signature: 'x',
          signedAt: base.signedAtMs,
          nonce: 'n-1',
        },
      }),
    ).toMatchObject({ code: 'DEVICE_AUTH_DEVICE_ID_MISMATCH' });
    expect(
      good({
        device: {
          id: deviceId,
          publicKey: raw.toString('base64url'),
          signature: 'x',
          signedAt: base.signedAtMs,
        },
      }),
    ).toMatchObject({
      code: 'DEVICE_AUTH_NONCE_REQUIRED',
    });
  });
});
