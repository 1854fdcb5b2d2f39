import { afterEach, describe, expect, it } from 'vitest';
import type { Runtime } from '../../src/runtime.js';
import { startRuntime } from '../runtime/helpers.js';
import { runCli as run } from './helpers.js';

let runtime: Runtime | undefined;
afterEach(async () => {
  await runtime?.close();
  runtime = undefined;
});

describe('agentd goal --url --idempotency-key', () => {
  it('answers a goal run again with its key by the plan already made, and refuses the key for another goal', async () => {
    const started = await startRuntime();
    runtime = started.runtime;
    const remote = ['--url', started.url, '--token', started.runtime.state.token, '--detach', '--json'];
    const goal = (text: string) => ['goal', text, '--session', 'keyed', '--idempotency-key', 'nightly-1'];
    const text = 'Collect the open questions. Then list the risks.';

    const first = await run([...goal(text), ...remote]);
    expect(first.code).toBe(0);
    const again = await run([...goal(text), ...remote]);
    expect(again.code).toBe(0);
    expect(JSON.parse(again.out).planId).toBe(JSON.parse(first.out).planId);
    const items = await started.runtime.work.queue.list({ sessionKey: 'agent:main:keyed' });
    expect(new Set(items.map((item) => item.params.planId))).toEqual(new Set([JSON.parse(first.out).planId]));
    expect(items.every((item) => item.params.idempotencyKey === 'nightly-1')).toBe(true);

    const other = await run([...goal('Something else entirely.'), ...remote]);
    expect(JSON.parse(other.out).error.code).toBe('CONFLICT');
    expect(other.code).toBe(2);
  });
});

describe('agentd goal --url --idempotency-key, waiting for the synthesis', () => {
  it('run again after the first ended, prints the same synthesis at once instead of waiting for one that went', async () => {
    const started = await startRuntime();
    runtime = started.runtime;
    const remote = [
      '--url',
      started.url,
      '--token',
      started.runtime.state.token,
      '--json',
      '--timeout-ms',
      '5000',
    ];
    const goal = [
      'goal',
      'Collect the open questions. Then list the risks.',
      '--session',
      'waits',
      '--idempotency-key',
      'k',
    ];

    const first = await run([...goal, ...remote]);
    expect(first.code).toBe(0);
    const answered = JSON.parse(first.out);
    expect(answered.synthesis).toEqual(expect.any(String));

    // Within --timeout-ms, or it would end TIMEOUT (exit 1).
    const again = await run([...goal, ...remote]);
    expect(again.err).toBe('');
    expect(again.code).toBe(0);
    const replayed = JSON.parse(again.out);
    expect(replayed.planId).toBe(answered.planId);
    expect(replayed.synthesis).toBe(answered.synthesis);
  });
});
