import { describe, expect, it } from 'vitest';
import type { ChatTurnInput } from '../../../src/chat/index.js';
import { runModelTurn } from '../../../src/chat/service/model-turn.js';
import { newRecord } from '../../../src/chat/service/records.js';
import type { EngageResult } from '../../../src/engage/index.js';
import { fakeContext } from './context.js';

const ref = { sessionId: 'session-1', sessionKey: 's', agentId: 'main' };

function result(outcome: Partial<EngageResult>): EngageResult {
  return {
    status: 'completed',
    text: 'hello',
    newMessages: [],
    usage: { inputTokens: 3, outputTokens: 2 },
    turns: 1,
    ...outcome,
  } as EngageResult;
}

describe('chat step: model turn', () => {
  it('writes the user message with the inbox move, runs the turn on the pinned context and keeps the reply', async () => {
    let input: ChatTurnInput | undefined;
    const { ctx, calls } = fakeContext({
      runTurn: async (turn) => {
        input = turn;
        const outcome = result({
          newMessages: [
            { role: 'assistant', content: '' },
            { role: 'assistant', content: 'hello' },
          ],
        });
        await turn.beforeFinish(outcome);
        return outcome;
      },
    });
    const record = newRecord(ctx, 'run-1', 's', 'main');
    await runModelTurn(ctx, record, ref, 'hi', new AbortController().signal);
    expect(input?.workItemId).toBe('session:session-1');
    // The system prompt, then the pinned context's conversation (its active entry's message only).
    expect(input?.messages).toEqual([
      { role: 'system', content: 'You are agentd.' },
      { role: 'user', content: 'earlier' },
    ]);
    expect(record).toMatchObject({
      status: 'completed',
      text: 'hello',
      usage: { inputTokens: 3, outputTokens: 2 },
      userMemoryId: 'mem:1',
      assistantMemoryId: 'batch:0',
    });
    // The empty assistant message is dropped; the run ends in the reply's transaction.
    const batch = calls.find((call) => call[0] === 'memory.appendBatch');
    expect(batch?.[2]).toHaveLength(1);
    // The session's count rides on the statements that mark the run and its end: no touch of its own.
    expect(calls.map((call) => call[0])).toEqual([
      'memory.append',
      'inbox.delete',
      'inbox.markRunning',
      'memory.pin',
      'lease.release',
      'memory.appendBatch',
      'inbox.markEnded',
      'lease.release',
    ]);
    expect(calls.find((call) => call[0] === 'inbox.markRunning')?.[2]).toEqual({
      messageDelta: 1,
      at: expect.any(Number),
    });
    expect(calls.find((call) => call[0] === 'inbox.markEnded')?.[2]).toEqual({
      sessionId: 'session-1',
      messageDelta: 1,
      at: expect.any(Number),
    });
    expect(ctx.running.has('run-1')).toBe(false);
  });

  it('keeps no transcript of a failed turn and leaves the run to be marked ended later', async () => {
    const { ctx, calls } = fakeContext({
      runTurn: async (turn) => {
        const outcome = result({
          status: 'error',
          text: '',
          error: { code: 'PROVIDER_ERROR', message: 'down', retryable: true },
          newMessages: [{ role: 'assistant', content: 'partial' }],
        });
        await turn.beforeFinish(outcome);
        return outcome;
      },
    });
    const record = newRecord(ctx, 'run-1', 's', 'main');
    await runModelTurn(ctx, record, ref, 'hi', new AbortController().signal);
    expect(record.status).toBe('error');
    expect(record.error?.code).toBe('PROVIDER_ERROR');
    expect(calls.some((call) => call[0] === 'memory.appendBatch')).toBe(false);
    expect(ctx.running.has('run-1')).toBe(true);
  });
});
