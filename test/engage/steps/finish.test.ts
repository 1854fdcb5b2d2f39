import { describe, expect, it, vi } from 'vitest';
import { abortedError, finish, recordInLedger } from '../../../src/engage/finish.js';
import { createRunState } from '../../../src/engage/run-state.js';
import type { Ledger } from '../../../src/ledger/index.js';
import { silentLogger } from '../../../src/util/index.js';
import { stepOptions } from './helpers.js';

describe('engage finish', () => {
  it('runs beforeFinish with the result, then publishes run:finished', async () => {
    const seen: string[] = [];
    const { options, events } = stepOptions([], {
      beforeFinish: async (result) => {
        seen.push(`${result.status}:${events.length}`);
      },
    });
    const state = createRunState(options);
    state.lastText = 'all done';
    const result = await finish(state, 'completed');
    expect(seen).toEqual(['completed:0']);
    expect(result).toMatchObject({ status: 'completed', text: 'all done' });
    expect(events.map((event) => [event.type, event.data])).toEqual([
      [
        'run:finished',
        {
          runId: 'run_1',
          status: 'completed',
          text: 'all done',
          usage: { inputTokens: 0, outputTokens: 0 },
          turns: 0,
        },
      ],
    ]);
  });

  it('a failing beforeFinish turns the run into an error', async () => {
    const { options, events } = stepOptions([], {
      beforeFinish: async () => {
        throw new Error('disk full');
      },
    });
    const result = await finish(createRunState(options), 'completed');
    expect(result).toMatchObject({ status: 'error', error: { message: 'disk full' } });
    expect(events[0]?.data).toMatchObject({ status: 'error' });
  });

  it('stops following the caller’s signal', async () => {
    const controller = new AbortController();
    const { options } = stepOptions([], { signal: controller.signal });
    const state = createRunState(options);
    await finish(state, 'aborted', abortedError());
    controller.abort();
    expect(state.signal.aborted).toBe(false);
  });

  it('records in the ledger when there is one, and never fails the run over it', async () => {
    const append = vi.fn(async () => ({}));
    await recordInLedger({ append } as unknown as Ledger, 'work_1', 'note', 'hello', silentLogger);
    expect(append).toHaveBeenCalledWith('work_1', { entryType: 'note', content: 'hello' });
    const broken = { append: async () => Promise.reject(new Error('locked')) } as unknown as Ledger;
    await expect(recordInLedger(broken, 'work_1', 'error', 'x', silentLogger)).resolves.toBeUndefined();
    await expect(recordInLedger(undefined, 'work_1', 'error', 'x', silentLogger)).resolves.toBeUndefined();
  });
});
