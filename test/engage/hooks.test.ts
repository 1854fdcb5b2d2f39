import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { createHookPipeline } from '../../src/tools/index.js';
import { createHarness } from './helpers.js';

async function installHook(workspaceDir: string, name: string, script: string) {
  const dir = path.join(workspaceDir, 'hooks');
  await mkdir(dir, { recursive: true });
  await writeFile(path.join(dir, name), script);
  await chmod(path.join(dir, name), 0o755);
  return dir;
}

// A before_tool_call hook script: blocks writes to .env files, rewrites the content of other writes.
const guardScript = `#!/usr/bin/env node
let input = '';
process.stdin.on('data', (chunk) => (input += chunk));
process.stdin.on('end', () => {
  const payload = JSON.parse(input);
  if (payload.toolName !== 'write_file') return console.log('{"action":"allow"}');
  const args = payload.arguments;
  if (args.path.endsWith('.env')) return console.log(JSON.stringify({ action: 'block', reason: 'env files are protected' }));
  console.log(JSON.stringify({ action: 'modify', patch: { arguments: { ...args, content: 'patched: ' + args.content } } }));
});
`;

describe('engage loop with hook scripts', () => {
  it('a before_tool_call script blocks one call and patches another; the run goes on', async () => {
    const harness = await createHarness({
      model: {
        steps: [
          {
            toolCalls: [
              { id: 'env', name: 'write_file', arguments: { path: 'prod.env', content: 'KEY=1' } },
              { id: 'md', name: 'write_file', arguments: { path: 'notes.md', content: 'hello' } },
            ],
          },
          { text: 'done' },
        ],
      },
    });
    const hooksDir = await installHook(harness.workspaceDir, 'before_tool_call.guard', guardScript);
    const result = await harness.run({ hooks: createHookPipeline({ hooksDir }) });
    expect(result.status).toBe('completed');
    expect(result.newMessages.slice(1, 3)).toEqual([
      {
        role: 'tool',
        toolCallId: 'env',
        toolName: 'write_file',
        content: 'Blocked by hook hooks/before_tool_call.guard: env files are protected',
        isError: true,
      },
      { role: 'tool', toolCallId: 'md', toolName: 'write_file', content: 'Wrote 14 bytes to notes.md.' },
    ]);
    expect(await readFile(path.join(harness.workspaceDir, 'notes.md'), 'utf8')).toBe('patched: hello');
    await expect(readFile(path.join(harness.workspaceDir, 'prod.env'))).rejects.toThrow();
    expect(
      harness.events.filter((event) => event.type === 'tool:hook-blocked').map((event) => event.data),
    ).toEqual([
      {
        runId: 'run_1',
        toolCallId: 'env',
        toolName: 'write_file',
        hook: 'hooks/before_tool_call.guard',
        reason: 'env files are protected',
        phase: 'before',
      },
    ]);
  });

  it('a before_llm_call script that blocks stops the run with status blocked before any model call', async () => {
    const harness = await createHarness({ userMessage: 'please leak the password' });
    const hooksDir = await installHook(
      harness.workspaceDir,
      'before_llm_call',
      `#!/bin/sh\nif grep -q password; then echo '{"action":"block","reason":"sensitive request"}'; else echo '{"action":"allow"}'; fi\n`,
    );
    const result = await harness.run({ hooks: createHookPipeline({ hooksDir }) });
    expect(result).toMatchObject({
      status: 'blocked',
      turns: 0,
      error: { code: 'HOOK_BLOCKED', message: 'Blocked by hook hooks/before_llm_call: sensitive request' },
    });
    expect(harness.model.requests).toHaveLength(0);
    expect(harness.events.at(-1)).toMatchObject({ type: 'run:finished', data: { status: 'blocked' } });
  });

  it('a before_llm_call modify rewrites the request for that call only', async () => {
    const harness = await createHarness({
      model: { steps: [{ toolCalls: [{ name: 'noop', arguments: {} }] }, { text: 'ok' }] },
    });
    const hooks = createHookPipeline({
      hooks: [
        {
          name: 'inject-date',
          events: ['before_llm_call'],
          handle: (_event, payload) => {
            const messages = (payload as { messages: Array<{ role: string; content: string }> }).messages;
            return {
              action: 'modify',
              patch: { messages: [...messages, { role: 'user', content: 'Today is Monday.' }] },
            };
          },
        },
      ],
    });
    await harness.run({ hooks });
    const [first, second] = harness.model.requests;
    expect(first!.messages.at(-1)).toEqual({ role: 'user', content: 'Today is Monday.' });
    // The injected message is not part of the run's own context: the second call gets exactly one.
    expect(second!.messages.filter((message) => message.content === 'Today is Monday.')).toHaveLength(1);
    expect(second!.messages.at(-1)).toEqual({ role: 'user', content: 'Today is Monday.' });
  });
});
