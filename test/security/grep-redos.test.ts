import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Runtime } from '../../src/runtime.js';
import { createScriptedModel, type ScriptedModel } from '../../src/testing.js';
import { startRuntime } from '../runtime/helpers.js';

describe('attack: a model-supplied regex that backtracks catastrophically', () => {
  let runtime: Runtime | undefined;
  let model: ScriptedModel | undefined;
  afterEach(async () => {
    await runtime?.close();
    model?.assertAllConsumed();
    runtime = undefined;
    model = undefined;
  });

  it('grep `^(a+)+$` over a hostile file through a chat turn never stalls the gateway', async () => {
    model = createScriptedModel({
      steps: [
        { toolCalls: [{ name: 'grep', arguments: { pattern: '^(a+)+$', path: 'hostile.txt' } }] },
        { toolCalls: [{ name: 'grep', arguments: { pattern: '(?<=a)b', path: 'hostile.txt' } }] },
        { text: 'done' },
      ],
    });
    const started = await startRuntime({ model });
    runtime = started.runtime;
    writeFileSync(join(runtime.state.workspaceDir, 'hostile.txt'), `${'a'.repeat(29)}b\n`);

    // The gateway's event loop must keep turning while the search runs: measure the longest gap.
    let last = Date.now();
    let longestGapMs = 0;
    const ticker = setInterval(() => {
      const now = Date.now();
      longestGapMs = Math.max(longestGapMs, now - last);
      last = now;
    }, 10);
    const reply = await runtime.sendMessage({ text: 'search it' });
    clearInterval(ticker);

    expect(reply.status).toBe('completed');
    const toolResults = model.requests[2]!.messages.filter((message) => message.role === 'tool');
    expect(toolResults.map((message) => message.content)).toEqual([
      'No matches.',
      expect.stringMatching(/INVALID_REQUEST: Invalid regular expression.*lookahead, lookbehind/),
    ]);
    // A generous bound: the unfixed grep held the loop for seconds on this input.
    expect(longestGapMs).toBeLessThan(1500);
  });
});
