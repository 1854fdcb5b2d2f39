import { chmod, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { createHookPipeline, type HookPayloads } from '../../src/tools/index.js';
import { createRecordingLogger } from '../../src/util/index.js';
import { useTempDirs } from './helpers.js';

const tempDir = useTempDirs();

async function writeHook(dir: string, name: string, script: string, executable = true) {
  const file = path.join(dir, 'hooks', name);
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, script);
  if (executable) await chmod(file, 0o755);
  return file;
}

const toolPayload = (args: Record<string, unknown>): HookPayloads['before_tool_call'] => ({
  runId: 'run_1',
  agentId: 'main',
  toolCallId: 'call_1',
  toolName: 'write_file',
  arguments: args,
});

describe('hook pipeline: executables', () => {
  it('discovers executables named after events, passes JSON on stdin, and applies a block', async () => {
    const workspace = await tempDir();
    // Blocks writes to *.env files, reading the payload from stdin with node itself.
    await writeHook(
      workspace,
      'before_tool_call.guard',
      `#!/usr/bin/env node
let input = '';
process.stdin.on('data', (chunk) => (input += chunk));
process.stdin.on('end', () => {
  const payload = JSON.parse(input);
  if (payload.event !== 'before_tool_call') throw new Error('wrong event');
  if (String(payload.arguments.path).endsWith('.env')) {
    console.log(JSON.stringify({ action: 'block', reason: 'env files are protected (cwd ' + (process.cwd() === ${JSON.stringify(workspace)}) + ')' }));
  } else console.log(JSON.stringify({ action: 'allow' }));
});
`,
    );
    await writeHook(workspace, 'notes.txt', 'not a hook', false);
    const logger = createRecordingLogger();
    const pipeline = createHookPipeline({
      hooksDir: path.join(workspace, 'hooks'),
      workingDir: workspace,
      logger,
    });
    expect(await pipeline.list()).toEqual(['hooks/before_tool_call.guard']);
    expect(await pipeline.run('before_tool_call', toolPayload({ path: 'a.txt' }))).toMatchObject({
      action: 'allow',
      modifiedBy: [],
    });
    expect(await pipeline.run('before_tool_call', toolPayload({ path: 'prod.env' }))).toEqual({
      action: 'block',
      reason: 'env files are protected (cwd true)',
      hook: 'hooks/before_tool_call.guard',
    });
  });

  it('applies modify patches in order, each hook seeing the previous patch', async () => {
    const workspace = await tempDir();
    await writeHook(
      workspace,
      'before_tool_call.1-prefix',
      `#!/bin/sh\necho '{"action":"modify","patch":{"arguments":{"path":"sandbox/a.txt","content":"x"}}}'\n`,
    );
    await writeHook(
      workspace,
      'before_tool_call.2-check',
      `#!/bin/sh\nif grep -q sandbox/a.txt; then echo '{"action":"modify","patch":{"arguments":{"path":"sandbox/a.txt","content":"patched twice"}}}'; else echo '{"action":"block","reason":"first patch not seen"}'; fi\n`,
    );
    const pipeline = createHookPipeline({ hooksDir: path.join(workspace, 'hooks') });
    const outcome = await pipeline.run('before_tool_call', toolPayload({ path: 'a.txt', content: 'x' }));
    expect(outcome).toEqual({
      action: 'allow',
      payload: { ...toolPayload({ path: 'sandbox/a.txt', content: 'patched twice' }) },
      modifiedBy: ['hooks/before_tool_call.1-prefix', 'hooks/before_tool_call.2-check'],
    });
  });

  it('answers an event no hook handles at once, and sees a hook added by the next reload', async () => {
    const workspace = await tempDir();
    const hooksDir = path.join(workspace, 'hooks');
    await writeHook(workspace, 'after_tool_call', '#!/bin/sh\necho \'{"action":"allow"}\'\n');
    const pipeline = createHookPipeline({ hooksDir, failMode: 'closed' });
    expect(await pipeline.run('before_tool_call', toolPayload({}))).toMatchObject({ action: 'allow' });
    await writeHook(workspace, 'before_tool_call', '#!/bin/sh\necho \'{"action":"block","reason":"new"}\'\n');
    // Discovered once, on first use: the new file waits for a reload.
    expect(await pipeline.run('before_tool_call', toolPayload({}))).toMatchObject({ action: 'allow' });
    const reloaded = pipeline.reload();
    // Asked while the reload still reads the folder: answered by what it finds.
    const during = pipeline.run('before_tool_call', toolPayload({}));
    await reloaded;
    expect(await during).toMatchObject({ action: 'block', reason: 'new' });
    expect(await pipeline.run('before_tool_call', toolPayload({}))).toMatchObject({ action: 'block' });
  });

  it('treats a crash, garbage output and a timeout by the fail mode', async () => {
    const workspace = await tempDir();
    const hooksDir = path.join(workspace, 'hooks');
    await writeHook(workspace, 'before_tool_call', '#!/bin/sh\necho boom >&2\nexit 3\n');
    const closed = createHookPipeline({ hooksDir, failMode: 'closed' });
    expect(await closed.run('before_tool_call', toolPayload({}))).toMatchObject({
      action: 'block',
      reason: expect.stringMatching(/exited with code 3: boom.*fail-closed/),
    });
    const open = createHookPipeline({ hooksDir, failMode: 'open' });
    expect(await open.run('before_tool_call', toolPayload({}))).toMatchObject({ action: 'allow' });

    await writeHook(workspace, 'before_tool_call', '#!/bin/sh\necho not json\n');
    await closed.reload();
    expect(await closed.run('before_tool_call', toolPayload({}))).toMatchObject({
      action: 'block',
      reason: expect.stringContaining('not valid JSON'),
    });

    await writeHook(workspace, 'before_tool_call', '#!/bin/sh\nexec sleep 30\n');
    const slowClosed = createHookPipeline({ hooksDir, failMode: 'closed', timeoutMs: 200 });
    expect(await slowClosed.run('before_tool_call', toolPayload({}))).toMatchObject({
      action: 'block',
      reason: expect.stringContaining('timed out after 200 ms'),
    });
    const slowOpen = createHookPipeline({ hooksDir, failMode: 'open', timeoutMs: 200 });
    expect(await slowOpen.run('before_tool_call', toolPayload({}))).toMatchObject({ action: 'allow' });
  });

  it('an empty stdout means allow; a hook that does not read stdin still works', async () => {
    const workspace = await tempDir();
    await writeHook(workspace, 'after_tool_call', '#!/bin/sh\nexit 0\n');
    const pipeline = createHookPipeline({ hooksDir: path.join(workspace, 'hooks') });
    const payload: HookPayloads['after_tool_call'] = {
      ...toolPayload({}),
      result: { content: 'x'.repeat(200_000), isError: false },
    };
    expect(await pipeline.run('after_tool_call', payload)).toMatchObject({ action: 'allow' });
  });
});

describe('hook pipeline: in-process', () => {
  it('runs in-process hooks first, ignores patch fields it may not change, and merges result patches', async () => {
    const pipeline = createHookPipeline({
      hooks: [
        {
          name: 'redact',
          events: ['after_tool_call'],
          handle: () => ({
            action: 'modify',
            patch: { result: { content: '[redacted]' }, toolName: 'other' },
          }),
        },
      ],
    });
    const outcome = await pipeline.run('after_tool_call', {
      ...toolPayload({}),
      result: { content: 'secret', isError: false },
    });
    expect(outcome).toMatchObject({
      action: 'allow',
      payload: { toolName: 'write_file', result: { content: '[redacted]', isError: false } },
    });
  });

  it('reads the caller’s signal only for an event a hook handles, and hands that hook the same signal', async () => {
    const seen: AbortSignal[] = [];
    const pipeline = createHookPipeline({
      hooks: [
        {
          name: 'watcher',
          events: ['before_tool_call'],
          handle: (_event, _payload, context) => {
            seen.push(context.signal);
            return undefined;
          },
        },
      ],
    });
    const controller = new AbortController();
    let reads = 0;
    const options = {
      get signal() {
        reads++;
        return controller.signal;
      },
    };
    const payload = { ...toolPayload({}), result: { content: 'fine', isError: false } };
    expect(await pipeline.run('after_tool_call', payload, options)).toEqual({
      action: 'allow',
      payload,
      modifiedBy: [],
    });
    expect(reads).toBe(0);
    expect(await pipeline.run('before_tool_call', toolPayload({}), options)).toMatchObject({
      action: 'allow',
    });
    expect(reads).toBe(1);
    expect(seen).toEqual([controller.signal]);
  });

  it('a throwing hook follows the fail mode; on_error hooks can never block', async () => {
    const throwing = {
      name: 'buggy',
      events: ['before_tool_call', 'on_error'] as const,
      handle: () => {
        throw new Error('bug');
      },
    };
    const closed = createHookPipeline({ hooks: [{ ...throwing, events: [...throwing.events] }] });
    expect(await closed.run('before_tool_call', toolPayload({}))).toMatchObject({
      action: 'block',
      hook: 'buggy',
    });
    expect(
      await closed.run('on_error', {
        runId: 'r',
        agentId: 'a',
        where: 'model',
        error: { code: 'X', message: 'y' },
      }),
    ).toMatchObject({ action: 'allow' });
    const blocker = createHookPipeline({
      hooks: [{ name: 'b', events: ['on_error'], handle: () => ({ action: 'block', reason: 'no' }) }],
    });
    expect(
      await blocker.run('on_error', {
        runId: 'r',
        agentId: 'a',
        where: 'model',
        error: { code: 'X', message: 'y' },
      }),
    ).toMatchObject({
      action: 'allow',
    });
  });

  it('rejects a before_llm_call patch whose messages are not model messages (fail closed)', async () => {
    const pipeline = createHookPipeline({
      hooks: [
        {
          name: 'bad',
          events: ['before_llm_call'],
          handle: () => ({ action: 'modify', patch: { messages: [{ role: 'robot' }] } }),
        },
      ],
    });
    const outcome = await pipeline.run('before_llm_call', {
      runId: 'r',
      agentId: 'a',
      turn: 1,
      model: 'scripted/x',
      messages: [{ role: 'user', content: 'hi' }],
      toolNames: [],
    });
    expect(outcome).toMatchObject({ action: 'block', reason: expect.stringContaining('malformed patch') });
  });
});
