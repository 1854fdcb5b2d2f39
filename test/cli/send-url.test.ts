import { afterEach, describe, expect, it } from 'vitest';
import type { Runtime } from '../../src/runtime.js';
import { startRuntime } from '../runtime/helpers.js';
import { runCli as run } from './helpers.js';

let runtime: Runtime | undefined;
afterEach(async () => {
  await runtime?.close();
  runtime = undefined;
});

describe('agentd send --url', () => {
  it('sends one turn to a running server and prints its reply as send does in-process', async () => {
    const started = await startRuntime();
    runtime = started.runtime;
    const remote = ['--url', started.url, '--token', started.runtime.state.token];

    const json = await run(['send', 'My launch code word is heron.', ...remote, '--session', 's1', '--json']);
    expect(json.code).toBe(0);
    const body = JSON.parse(json.out);
    expect(body).toMatchObject({ sessionKey: 'agent:main:s1', status: 'completed' });
    expect(body.text.length).toBeGreaterThan(0);

    const text = await run(['send', 'What is the launch code word?', ...remote, '--session', 's1']);
    expect(text.code).toBe(0);
    expect(text.out.trim().length).toBeGreaterThan(0);
    expect(text.out.endsWith('\n')).toBe(true);
  });
});
