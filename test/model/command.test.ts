import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { completeModel } from '../../src/model/call.js';
import { commandPresets, createCommandModel } from '../../src/model/command.js';
import { renderConversation } from '../../src/model/render.js';
import type { ModelRequest } from '../../src/model/spec.js';

const script = fileURLToPath(new URL('./fixtures/fake-cli.mjs', import.meta.url));
const fakeCli = (mode: string, extra: { timeoutMs?: number; format?: 'text' | 'claude-stream-json' } = {}) =>
  createCommandModel({
    command: process.execPath,
    args: [script, mode],
    modelId: `fake-${mode}`,
    killGraceMs: 100,
    ...extra,
  });
const request: ModelRequest = {
  messages: [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'What is 2+2?' },
  ],
};
const once = { retry: { maxAttempts: 1 } };

describe('command provider', () => {
  it('sends the rendered conversation on stdin and streams stdout as the reply', async () => {
    const response = await completeModel(fakeCli('echo'), request, once);
    expect(response.stopReason).toBe('end_turn');
    expect(renderConversation(request)).toBe('System:\nBe brief.\n\nUser:\nWhat is 2+2?\n');
    expect(response.text).toBe('echo: What is 2+2? (38 chars)');
    // No usage from a plain-text CLI: the wrapper estimates it.
    expect(response.usage.outputTokens).toBeGreaterThan(0);
  });

  it('reports a non-zero exit as PROVIDER_ERROR with the end of stderr', async () => {
    const response = await completeModel(fakeCli('fail'), request, once);
    expect(response.error).toMatchObject({ code: 'PROVIDER_ERROR', retryable: false });
    expect(response.error!.message).toContain('exited with code 2');
    expect(response.error!.message).toContain('unknown flag --bogus');
  });

  it('reports empty output as PROVIDER_ERROR', async () => {
    const response = await completeModel(fakeCli('empty'), request, once);
    expect(response.error).toMatchObject({ code: 'PROVIDER_ERROR' });
    expect(response.error!.message).toContain('produced no output');
  });

  it('kills a process that runs past its timeout with PROVIDER_TIMEOUT', async () => {
    const response = await completeModel(fakeCli('hang', { timeoutMs: 300 }), request, once);
    expect(response.error).toMatchObject({ code: 'PROVIDER_TIMEOUT' });
  });

  it('kills the process on abort', async () => {
    const controller = new AbortController();
    const pending = completeModel(fakeCli('hang'), request, { signal: controller.signal, ...once });
    setTimeout(() => controller.abort(), 50);
    expect((await pending).stopReason).toBe('aborted');
  });

  it('reads Claude Code stream-json: assistant text, usage from the result line, is_error as an error', async () => {
    const response = await completeModel(fakeCli('claude', { format: 'claude-stream-json' }), request, once);
    expect(response).toMatchObject({
      text: 'Hello from\n\nclaude.',
      usage: { inputTokens: 15, outputTokens: 4 },
      stopReason: 'end_turn',
    });
    const failed = await completeModel(
      fakeCli('claude-error', { format: 'claude-stream-json' }),
      request,
      once,
    );
    expect(failed.error?.message).toContain('Credit balance is too low');
  });

  it('says clearly when the command does not exist', async () => {
    const missing = createCommandModel({ command: 'agentd-no-such-cli-xyz' });
    const response = await completeModel(missing, request, once);
    expect(response.error?.message).toContain("'agentd-no-such-cli-xyz' was not found");
  });

  it('has presets for claude and gemini', () => {
    expect(commandPresets.claude).toMatchObject({
      command: 'claude',
      args: ['-p', '--output-format', 'stream-json', '--verbose'],
    });
    expect(commandPresets.gemini.command).toBe('gemini');
  });
});
