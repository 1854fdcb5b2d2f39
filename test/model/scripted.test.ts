import { describe, expect, it, vi } from 'vitest';
import { completeModel } from '../../src/model/call.js';
import { createScriptedModel, UnexpectedModelCallError, unexpectedModelCallCode } from '../../src/testing.js';

const ask = (content: string) => ({ messages: [{ role: 'user' as const, content }] });

describe('scripted model', () => {
  it('plays steps in order: text, tool calls, responders; and records frozen request copies', async () => {
    const model = createScriptedModel({
      steps: [
        { text: ['Hel', 'lo'], usage: { inputTokens: 1, outputTokens: 2 } },
        { toolCalls: [{ name: 'search', arguments: { q: 'x' } }] },
        (request, callIndex) => ({ text: `call ${callIndex} saw ${request.messages[0]!.content}` }),
      ],
    });
    const request = ask('one');
    expect(await completeModel(model, request)).toMatchObject({
      text: 'Hello',
      usage: { inputTokens: 1, outputTokens: 2 },
    });
    expect(await completeModel(model, ask('two'))).toMatchObject({
      stopReason: 'tool_calls',
      toolCalls: [{ id: 'call_2_0', name: 'search', arguments: { q: 'x' } }],
    });
    expect((await completeModel(model, ask('three'))).text).toBe('call 2 saw three');
    request.messages[0]!.content = 'mutated later';
    expect(model.requests.map((recorded) => recorded.messages[0]!.content)).toEqual(['one', 'two', 'three']);
    expect(Object.isFrozen(model.requests[0]!.messages[0])).toBe(true);
    model.assertAllConsumed();
  });

  it('ends an unexpected call with an error stream and makes assertAllConsumed throw', async () => {
    const model = createScriptedModel();
    const response = await completeModel(model, ask('surprise'));
    expect(response.error).toMatchObject({ code: unexpectedModelCallCode, retryable: false });
    expect(model.unexpectedCalls[0]).toBeInstanceOf(UnexpectedModelCallError);
    expect(() => model.assertAllConsumed()).toThrow(/Unexpected model call #1.*user: surprise/);
  });

  it('lists leftover steps in assertAllConsumed', () => {
    const model = createScriptedModel({
      steps: [{ text: 'never used' }, { error: { code: 'PROVIDER_AUTH' } }],
    });
    expect(() => model.assertAllConsumed()).toThrow(
      '2 scripted step(s) were never used: text("never used"), error(PROVIDER_AUTH)',
    );
  });

  it('ends a delayed step with ABORTED when the signal aborts during the delay', async () => {
    const model = createScriptedModel({ steps: [{ text: 'slow', delayMs: 60_000 }] });
    const controller = new AbortController();
    const pending = completeModel(model, ask('x'), { signal: controller.signal });
    await vi.waitFor(() => expect(model.requests).toHaveLength(1));
    controller.abort();
    expect((await pending).stopReason).toBe('aborted');
    model.assertAllConsumed();
  });
});
