import { describe, expect, it } from 'vitest';
import { createBus } from '../../src/bus/index.js';
import { createMethodTable, isAsyncResult, registerCoreMethods } from '../../src/gateway/index.js';
import { createFakeServices, testMethodContext } from './helpers.js';

const context = () => testMethodContext(['operator.write', 'operator.read']);

/** A gateway method table over a fake chat whose runs do not finish. */
function tableWithHeldRuns() {
  const bus = createBus();
  const { services, chat } = createFakeServices(bus, { holdRuns: true });
  const table = createMethodTable();
  registerCoreMethods(table, services);
  return { table, chat };
}

const maxTimerMs = 2 ** 31 - 1;
const settledWithin = (promise: Promise<unknown>, ms: number) =>
  Promise.race([
    promise.then(
      (value) => ({ settled: 'resolved', value }),
      (error: unknown) => ({ settled: 'rejected', error }),
    ),
    new Promise((resolve) => setTimeout(() => resolve('pending'), ms)),
  ]);

describe('waiting for a run through the gateway', () => {
  it('agent.wait refuses a timeoutMs past 2^31 - 1 with INVALID_REQUEST instead of timing out at once', async () => {
    const { table } = tableWithHeldRuns();
    await table.invoke(
      'chat.send',
      { sessionKey: 'main', message: 'hi', idempotencyKey: 'run-1' },
      context(),
    );

    await expect(
      table.invoke('agent.wait', { runId: 'run-1', timeoutMs: maxTimerMs + 1 }, context()),
    ).rejects.toMatchObject({ code: 'INVALID_REQUEST', message: expect.stringContaining('timeoutMs') });
    await expect(
      table.invoke('agent.wait', { runId: 'run-1', timeoutMs: 10 * maxTimerMs }, context()),
    ).rejects.toMatchObject({ code: 'INVALID_REQUEST' });
    // The longest timer is accepted, and waits.
    expect(
      await settledWithin(
        table.invoke('agent.wait', { runId: 'run-1', timeoutMs: maxTimerMs }, context()),
        30,
      ),
    ).toBe('pending');
  });

  it('agent refuses a timeout (seconds) past 2^31 - 1 ms with INVALID_REQUEST, before starting a run', async () => {
    const { table, chat } = tableWithHeldRuns();
    await expect(
      table.invoke('agent', { message: 'hi', idempotencyKey: 'run-1', timeout: 2_147_484 }, context()),
    ).rejects.toMatchObject({ code: 'INVALID_REQUEST', message: expect.stringContaining('timeout') });
    expect(chat.sent).toEqual([]);

    const accepted = await table.invoke(
      'agent',
      { message: 'hi', idempotencyKey: 'run-2', timeout: 2_147_483 },
      context(),
    );
    expect(isAsyncResult(accepted)).toBe(true);
    if (!isAsyncResult(accepted)) return;
    expect(await settledWithin(accepted.final, 30)).toBe('pending');
  });
});
