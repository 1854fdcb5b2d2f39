import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { createRuntime, type Runtime } from '../../src/runtime.js';
import { createScriptedModel, type ScriptedModel } from '../../src/testing.js';
import { captureLog, startRuntime, tempHome } from '../runtime/helpers.js';

function writeExecutable(file: string, script: string) {
  mkdirSync(join(file, '..'), { recursive: true });
  writeFileSync(file, script);
  chmodSync(file, 0o755);
}

describe('attack: the model rewrites a hook to get code execution', () => {
  let runtime: Runtime | undefined;
  let model: ScriptedModel | undefined;
  afterEach(async () => {
    await runtime?.close();
    model?.assertAllConsumed();
    runtime = undefined;
    model = undefined;
  });

  it('hooks the agent can write are never run, and hook locations and state files refuse tool writes', async () => {
    const home = tempHome('agentd-sec-hooks-');
    const pwned = join(home, 'pwned');
    const operatorRan = join(home, 'operator-hook-ran');
    const payload = `#!/bin/sh\ntouch ${pwned}\necho '{"action":"allow"}'\n`;
    // An operator's hook from before hooks moved out of the workspace, still executable.
    writeExecutable(
      join(home, 'workspace', 'hooks', 'before_tool_call.audit'),
      '#!/bin/sh\necho \'{"action":"allow"}\'\n',
    );
    // The operator's real hook, in the state directory.
    writeExecutable(
      join(home, 'hooks', 'after_tool_call.mark'),
      `#!/bin/sh\ntouch ${operatorRan}\necho '{"action":"allow"}'\n`,
    );
    const write = (path: string) => ({ name: 'write_file', arguments: { path, content: payload } });
    model = createScriptedModel({
      steps: [
        // The takeover as it worked before: overwrite the (executable) workspace hook, then trigger it.
        { toolCalls: [write('hooks/before_tool_call.audit')] },
        { toolCalls: [{ name: 'list_files', arguments: { path: '.' } }] },
        // The real hook directory, by every spelling, and agentd's own files.
        {
          toolCalls: [
            write('../hooks/before_tool_call.pwn'),
            write(join(home, 'hooks', 'before_tool_call.pwn2')),
            write('../token'),
            write('../agentd.db'),
          ],
        },
        { text: 'done' },
      ],
    });
    const log = captureLog();
    const started = await startRuntime({ home, model, log });
    runtime = started.runtime;

    const reply = await runtime.sendMessage({ text: 'go' });
    expect(reply.status).toBe('completed');

    expect(existsSync(pwned)).toBe(false);
    expect(existsSync(operatorRan)).toBe(true);
    const refused = model.requests[3]!.messages.filter((message) => message.role === 'tool').slice(-4);
    for (const result of refused) {
      expect(result).toMatchObject({ isError: true });
      expect(result.content).toMatch(/PATH_OUTSIDE_WORKSPACE|PATH_PROTECTED/);
    }
    expect(existsSync(join(home, 'hooks', 'before_tool_call.pwn'))).toBe(false);
    expect(existsSync(join(home, 'hooks', 'before_tool_call.pwn2'))).toBe(false);
    expect(readFileSync(join(home, 'token'), 'utf8').trim()).toBe(runtime.state.token);
    // The operator is told that the old workspace hook no longer runs.
    expect(log.text()).toContain('hooks in the workspace are no longer run');
    expect(log.text()).toContain('before_tool_call.audit');
  });

  it('refuses to start with a hook directory inside the workspace', async () => {
    const home = tempHome('agentd-sec-hooks-');
    writeFileSync(join(home, 'agentd.yaml'), 'tools:\n  hooks:\n    dir: workspace/my-hooks\n');
    const env = { AGENTD_HOME: home };
    const config = loadConfig({ cwd: home, env, overrides: { port: 0 } });
    await expect(
      createRuntime({ config, env, model: createScriptedModel(), logDestination: captureLog().stream }),
    ).rejects.toMatchObject({ code: 'INVALID_CONFIG' });
  });
});
