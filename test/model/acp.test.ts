import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { createAcpModel } from '../../src/model/acp.js';
import { completeModel } from '../../src/model/call.js';
import { resolveModel } from '../../src/model/registry.js';
import type { ModelRequest, ModelStreamEvent } from '../../src/model/spec.js';

const agentScript = fileURLToPath(new URL('./fixtures/acp-agent.mjs', import.meta.url));
const fakeAgent = (extra: { permissions?: 'reject' | 'allow'; timeoutMs?: number } = {}) =>
  createAcpModel({ command: process.execPath, args: [agentScript], killGraceMs: 100, ...extra });
const ask = (text: string): ModelRequest => ({
  messages: [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: text },
  ],
});
const once = { retry: { maxAttempts: 1 } };

async function collect(stream: AsyncIterable<ModelStreamEvent>): Promise<ModelStreamEvent[]> {
  const events: ModelStreamEvent[] = [];
  for await (const event of stream) events.push(event);
  return events;
}

describe('acp provider', () => {
  it('prompts the agent with the rendered conversation and streams its message chunks', async () => {
    const events = await collect(fakeAgent().doStream(ask('What is 2+2?'), {}));
    expect(events).toEqual([
      { type: 'text-delta', text: 'You said: ' },
      { type: 'text-delta', text: JSON.stringify('System:\nBe brief.\n\nUser:\nWhat is 2+2?\n') },
      { type: 'finish', stopReason: 'end_turn' },
    ]);
  });

  it('is reachable as acp/<command line> and answers permission requests (reject by default)', async () => {
    const model = resolveModel(`acp/${process.execPath} ${agentScript}`);
    expect(model.provider).toBe('acp');
    expect((await completeModel(model, ask('permission'), once)).text).toBe('permission: no');
    const allowing = fakeAgent({ permissions: 'allow' });
    expect((await completeModel(allowing, ask('permission'), once)).text).toBe('permission: yes');
  });

  it('ends with an error event, never a throw, when the agent dies mid-turn', async () => {
    const events = await collect(fakeAgent().doStream(ask('crash'), {}));
    expect(events[0]).toEqual({ type: 'text-delta', text: 'about to ' });
    expect(events).toHaveLength(2);
    expect(events[1]).toMatchObject({ type: 'error', error: { code: 'PROVIDER_ERROR', retryable: false } });
    const message = (events[1] as { error: { message: string } }).error.message;
    expect(message).toContain('exited with code 4');
    expect(message).toContain('fake agent: crashing');
  });

  it('cancels the session and ends with ABORTED when the call is aborted', async () => {
    const controller = new AbortController();
    const events: ModelStreamEvent[] = [];
    for await (const event of fakeAgent().doStream(ask('hang'), { signal: controller.signal })) {
      events.push(event);
      if (event.type === 'text-delta') controller.abort();
    }
    expect(events).toEqual([
      { type: 'text-delta', text: 'waiting' },
      { type: 'error', error: expect.objectContaining({ code: 'ABORTED' }) },
    ]);
  });

  it('reports a missing command and a missing command name', async () => {
    const events = await collect(
      createAcpModel({ command: '/nonexistent/acp-agent' }).doStream(ask('x'), {}),
    );
    expect(events).toEqual([
      {
        type: 'error',
        error: expect.objectContaining({
          code: 'PROVIDER_ERROR',
          message: expect.stringContaining('was not found'),
        }),
      },
    ]);
    expect(() => resolveModel('acp/ ')).toThrow(/names no command/);
  });
});
