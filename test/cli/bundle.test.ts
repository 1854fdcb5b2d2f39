import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type FakeOpenAIServer, startFakeOpenAIServer } from '../helpers/fake-openai-server.js';
import { tempHome } from '../runtime/helpers.js';

const repoRoot = join(import.meta.dirname, '..', '..');

/** `bin/agentd.js` with `args` in a process of its own (the bundled CLI under dist/cli-bundle/). */
function runBin(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string }> {
  const child = spawn(process.execPath, ['bin/agentd.js', ...args], {
    cwd: repoRoot,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', AGENTD_LOG_LEVEL: 'silent', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  child.stdout.on('data', (chunk) => {
    stdout += String(chunk);
  });
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, stdout })));
}

describe('the bundled command line', () => {
  let provider: FakeOpenAIServer | undefined;
  afterEach(async () => {
    await provider?.close();
    provider = undefined;
  });

  it('is what bin/agentd.js runs: the commands and the sandbox worker are chunks of dist/cli-bundle', () => {
    const files = readdirSync(join(repoRoot, 'dist', 'cli-bundle'));
    expect(files).toContain('bin.js');
    expect(files).toContain('worker.js');
  });

  it('runs model-written code in the sandbox, whose worker the bundled pool finds beside it', async () => {
    provider = await startFakeOpenAIServer();
    provider.respond(
      {
        type: 'stream',
        toolCalls: [
          {
            id: 'call_1',
            name: 'execute_code',
            argumentChunks: [JSON.stringify({ language: 'javascript', code: 'return 6 * 7;' })],
          },
        ],
      },
      { type: 'stream', text: ['done'] },
    );
    const { code, stdout } = await runBin(['send', 'compute', '--json'], {
      AGENTD_HOME: tempHome('agentd-bundle-'),
      OPENAI_API_KEY: 'sk-test',
      OPENAI_BASE_URL: provider.baseURL,
      AGENTD_MODEL: 'openai/gpt-test',
    });
    expect(code, stdout).toBe(0);
    expect(JSON.parse(stdout).status).toBe('completed');
    // The model's second request carries the tool's result: the worker ran the code.
    const second = provider.requests[1]!.body as { messages: Array<{ role: string; content: unknown }> };
    const toolResult = second.messages.find((message) => message.role === 'tool');
    expect(JSON.stringify(toolResult?.content)).toContain('42');
  });
});
