import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  AgentdError,
  coerceError,
  createIdGenerator,
  createKeyedMutex,
  createSemaphore,
  errorForClient,
  ProviderError,
  parseUntrustedJson,
  SystemError,
  UserInputError,
} from '../../src/util/index.js';

describe('errors', () => {
  it('carries code, fault and retryable and is recognized across copies', () => {
    const error = new UserInputError({ code: 'INVALID_REQUEST', message: 'bad' });
    expect(error.fault).toBe('user');
    expect(AgentdError.isInstance(error)).toBe(true);
    expect(AgentdError.isInstance({ code: 'x' })).toBe(false);
    expect(error.toJSON()).toEqual({ code: 'INVALID_REQUEST', message: 'bad', retryable: false });
  });
  it("a fault's class recognizes only errors of its fault, also from another copy of the package", () => {
    const errors = {
      user: new UserInputError({ code: 'INVALID_REQUEST', message: 'bad' }),
      provider: new ProviderError({ code: 'PROVIDER_ERROR', message: 'upstream', statusCode: 502 }),
      system: new SystemError({ code: 'CONFLICT', message: 'ended' }),
      // What an error made by a second copy of agentd looks like to this one: the marker and the fault.
      copiedUser: Object.assign(new Error('bad'), {
        [Symbol.for('agentd.error')]: true,
        code: 'INVALID_REQUEST',
        fault: 'user',
      }),
    };
    const recognized = (check: (error: unknown) => boolean) =>
      Object.entries(errors)
        .filter(([, error]) => check(error))
        .map(([name]) => name);
    expect(recognized((error) => AgentdError.isInstance(error))).toEqual([
      'user',
      'provider',
      'system',
      'copiedUser',
    ]);
    expect(recognized((error) => UserInputError.isInstance(error))).toEqual(['user', 'copiedUser']);
    expect(recognized((error) => ProviderError.isInstance(error))).toEqual(['provider']);
    expect(recognized((error) => SystemError.isInstance(error))).toEqual(['system']);
  });
  it('tells a client an agentd error as it is and anything else as INTERNAL without its text', () => {
    const conflict = new SystemError({ code: 'CONFLICT', message: 'ended', details: { sessionId: 's' } });
    expect(errorForClient(conflict, 'see the log')).toEqual({
      code: 'CONFLICT',
      message: 'ended',
      retryable: false,
      details: { sessionId: 's' },
    });
    expect(errorForClient(new Error('/home/alice/secret.db: ENOENT'), 'see the log')).toEqual({
      code: 'INTERNAL',
      message: 'see the log',
      retryable: false,
    });
  });
  it('coerces unknown throws into system errors keeping the cause', () => {
    const cause = new TypeError('oops');
    const error = coerceError(cause);
    expect(error.code).toBe('INTERNAL');
    expect(error.fault).toBe('system');
    expect(error.cause).toBe(cause);
  });
});

describe('parseUntrustedJson', () => {
  const schema = z.object({ a: z.number() });
  it('rejects oversized input before parsing', () => {
    expect(() => parseUntrustedJson('x'.repeat(100), schema, { maxBytes: 10 })).toThrow(/limit is 10 bytes/);
  });
  it('rejects malformed JSON and schema mismatches with INVALID_REQUEST', () => {
    for (const text of ['{', '{"a":"no"}']) {
      try {
        parseUntrustedJson(text, schema, { maxBytes: 100 });
        expect.unreachable();
      } catch (error) {
        expect((error as AgentdError).code).toBe('INVALID_REQUEST');
      }
    }
    expect(parseUntrustedJson('{"a":1}', schema, { maxBytes: 100 })).toEqual({ a: 1 });
  });
});

describe('ids', () => {
  it('are unique and sort in creation order, even within one millisecond', () => {
    const next = createIdGenerator({ now: () => 1_700_000_000_000 });
    const ids = Array.from({ length: 500 }, () => next('run'));
    expect(new Set(ids).size).toBe(500);
    expect([...ids].sort()).toEqual(ids);
    expect(ids[0]).toMatch(/^run_[0-9a-z]{22}$/);
  });

  it('have random tails that differ between generators on the same clock, across many draws', () => {
    const first = createIdGenerator({ now: () => 1_700_000_000_000 });
    const second = createIdGenerator({ now: () => 1_700_000_000_000 });
    // 2 × 1,500 ids draw 24,000 random bytes: several refills of the shared random pool.
    const pairs = Array.from({ length: 1_500 }, () => [first(), second()] as const);
    for (const [a, b] of pairs) {
      expect(a.slice(0, 14)).toBe(b.slice(0, 14));
      expect(a.slice(14)).not.toBe(b.slice(14));
    }
    expect(new Set(pairs.map(([a]) => a.slice(14))).size).toBe(1_500);
  });
});

describe('semaphore and keyed mutex', () => {
  it('never runs more than the limit at once', async () => {
    const semaphore = createSemaphore(2);
    let running = 0;
    let peak = 0;
    const releases: Array<() => void> = [];
    const tasks = Array.from({ length: 6 }, () =>
      semaphore.run(async () => {
        running++;
        peak = Math.max(peak, running);
        await new Promise<void>((resolve) => releases.push(resolve));
        running--;
      }),
    );
    let finished = 0;
    for (const task of tasks) task.then(() => finished++);
    while (finished < 6) {
      await new Promise((resolve) => setImmediate(resolve));
      expect(running).toBeLessThanOrEqual(2);
      releases.shift()?.();
    }
    await Promise.all(tasks);
    expect(peak).toBe(2);
  });

  it('an aborted waiter leaves the queue', async () => {
    const semaphore = createSemaphore(1);
    const release = await semaphore.acquire();
    const controller = new AbortController();
    const waiting = semaphore.acquire(controller.signal);
    expect(semaphore.waiting).toBe(1);
    controller.abort(new Error('stop'));
    await expect(waiting).rejects.toThrow('stop');
    expect(semaphore.waiting).toBe(0);
    release();
    expect(semaphore.active).toBe(0);
  });

  it('runs work per key in FIFO order and keeps going after a failure', async () => {
    const mutex = createKeyedMutex();
    const order: string[] = [];
    const slow = mutex.run('k', async () => {
      await new Promise((resolve) => setTimeout(resolve, 5));
      order.push('a');
      throw new Error('a failed');
    });
    const fast = mutex.run('k', async () => {
      order.push('b');
    });
    await expect(slow).rejects.toThrow('a failed');
    await fast;
    expect(order).toEqual(['a', 'b']);
  });

  it('starts work for a free key at once, queues work for a held one, and frees the key when all is done', async () => {
    const mutex = createKeyedMutex();
    const order: string[] = [];
    let finishFirst!: () => void;
    const first = mutex.run('k', () => {
      order.push('first started');
      return new Promise<void>((resolve) => {
        finishFirst = resolve;
      });
    });
    // Within run(): no microtask has passed.
    expect(order).toEqual(['first started']);
    expect(mutex.isLocked('k')).toBe(true);
    const thrown = mutex.run('k', () => {
      order.push('second started');
      throw new Error('thrown before its first await');
    });
    const other = mutex.run('other', async () => {
      order.push('other key started');
    });
    expect(order).toEqual(['first started', 'other key started']);
    await other;
    expect(mutex.isLocked('other')).toBe(false);
    finishFirst();
    await first;
    await expect(thrown).rejects.toThrow('thrown before its first await');
    expect(order).toEqual(['first started', 'other key started', 'second started']);
    expect(mutex.isLocked('k')).toBe(false);
    // A key freed is free again: the next work starts at once.
    void mutex.run('k', async () => order.push('third started'));
    expect(order.at(-1)).toBe('third started');
  });
});
