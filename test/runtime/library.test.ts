import { cpSync, mkdirSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  type BusEvent,
  createRuntime,
  defineAgent,
  defineTool,
  loadConfig,
  type Runtime,
  UserInputError,
} from '../../src/index.js';
import { createScriptedModel } from '../../src/testing.js';
import { captureLog, tempHome } from './helpers.js';

// Tool modules in a temp directory cannot resolve `zod` by name; they import the project's copy by URL.
const zodUrl = pathToFileURL(createRequire(import.meta.url).resolve('zod')).href;

const shoutModule = `import { z } from '${zodUrl}';
export const tools = [{
  name: 'shout',
  description: 'Upper-cases the text.',
  input: z.object({ text: z.string() }),
  execute: async ({ text }, context) => text.toUpperCase() + ' from ' + context.agentId,
}];
`;

function projectWith(files: Record<string, string>, yaml: string): string {
  const dir = tempHome('agentd-library-');
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(dir, path, '..'), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  writeFileSync(join(dir, 'agentd.yaml'), `home: ./home\n${yaml}`);
  return dir;
}

describe('agentd as a library', () => {
  let runtime: Runtime | undefined;
  afterEach(async () => {
    await runtime?.close();
    runtime = undefined;
  });

  it('loads tools.modules relative to agentd.yaml; a chat turn calls the module tool and a code tool', async () => {
    const dir = projectWith({ 'tools/shout.mjs': shoutModule }, 'tools:\n  modules: [./tools/shout.mjs]\n');
    const add = defineTool({
      name: 'add',
      description: 'Adds two numbers.',
      input: z.object({ a: z.number(), b: z.number() }),
      execute: async ({ a, b }) => String(a + b),
    });
    const model = createScriptedModel({
      steps: [
        {
          toolCalls: [
            { name: 'shout', arguments: { text: 'hello' } },
            { name: 'add', arguments: { a: 2, b: 3 } },
          ],
        },
        (request) => ({
          text: request.messages
            .filter((message) => message.role === 'tool')
            .map((message) => message.content)
            .join(' | '),
        }),
      ],
    });
    // Another working directory, so only the config file's location can make the relative path resolve.
    const config = loadConfig({ cwd: tempHome(), configPath: join(dir, 'agentd.yaml'), env: {} });
    runtime = await createRuntime({
      config,
      env: {},
      model,
      tools: [add],
      agents: [defineAgent({ id: 'helper', role: 'helps' })],
      logDestination: captureLog().stream,
    });
    expect(runtime.config.agents.map((agent) => agent.id)).toEqual(['helper']);
    expect(runtime.tools.has('shout')).toBe(true);
    const finished: Array<BusEvent<'run:tool-finished'>> = [];
    runtime.bus.on('run:tool-finished', (event) => finished.push(event));

    const reply = await runtime.sendMessage({ text: 'shout hello and add 2 and 3' });
    expect(reply.status).toBe('completed');
    expect(reply.text).toBe('HELLO from main | 5');
    expect(model.requests[0]!.tools?.map((tool) => tool.name)).toEqual(
      expect.arrayContaining(['shout', 'add']),
    );
    expect(finished.map((event) => event.data.toolName).sort()).toEqual(['add', 'shout']);
  });

  const badModules: Array<[string, Record<string, string>, string, string]> = [
    ['a missing file', {}, './tools/missing.mjs', 'TOOL_MODULE_NOT_FOUND'],
    ['a package name', {}, 'some-package', 'TOOL_MODULE_NOT_FOUND'],
    [
      'a module that throws on import',
      { 'tools/broken.mjs': "throw new Error('boom');\n" },
      './tools/broken.mjs',
      'TOOL_MODULE_IMPORT_FAILED',
    ],
    [
      'a module without tools',
      { 'tools/empty.mjs': 'export const other = 1;\n' },
      './tools/empty.mjs',
      'TOOL_MODULE_INVALID',
    ],
    [
      'a tool without a zod schema',
      {
        'tools/plain.mjs':
          "export default { name: 'plain', description: 'x', input: { type: 'object' }, execute: async () => 'ok' };\n",
      },
      './tools/plain.mjs',
      'TOOL_MODULE_INVALID',
    ],
    [
      'a tool named like a built-in',
      { 'tools/shadow.mjs': shoutModule.replace("name: 'shout'", "name: 'read_file'") },
      './tools/shadow.mjs',
      'TOOL_MODULE_INVALID',
    ],
  ];
  it.each(badModules)('refuses %s with a stable code', async (_what, files, module, code) => {
    const dir = projectWith(files, `tools:\n  modules: ['${module}']\n`);
    const config = loadConfig({ cwd: dir, env: {} });
    const error = await createRuntime({ config, env: {}, logDestination: captureLog().stream }).catch(
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(UserInputError);
    expect((error as UserInputError).code).toBe(code);
    expect((error as UserInputError).message).toContain(module);
  });

  it('refuses a module tool whose name a code tool has, and an agent defined twice', async () => {
    const dir = projectWith(
      { 'tools/shout.mjs': shoutModule },
      'tools:\n  modules: [./tools/shout.mjs]\nagents:\n  - id: helper\n',
    );
    const config = loadConfig({ cwd: dir, env: {} });
    const shout = defineTool({
      name: 'shout',
      description: 'x',
      input: z.object({}),
      execute: async () => 'x',
    });
    await expect(
      createRuntime({ config, env: {}, tools: [shout], logDestination: captureLog().stream }),
    ).rejects.toMatchObject({ code: 'TOOL_MODULE_INVALID' });
    await expect(
      createRuntime({
        config: { ...config, sections: { ...config.sections, tools: {} } },
        env: {},
        agents: [defineAgent({ id: 'helper' })],
        logDestination: captureLog().stream,
      }),
    ).rejects.toMatchObject({ code: 'CONFLICT' });
    expect(() => defineAgent({ id: 'Not Valid' })).toThrow(
      expect.objectContaining({ code: 'INVALID_CONFIG' }) as Error,
    );
  });

  it('resumes the chat a stop left when asked, with no gateway: an interrupted run ends, a waiting message runs', async () => {
    const home = tempHome();
    const config = loadConfig({ cwd: home, env: { AGENTD_HOME: home } });
    // What a crash leaves: a run whose user message is stored and marked running, and a message accepted
    // into the inbox whose turn never started.
    runtime = await createRuntime({ config, env: {}, logDestination: captureLog().stream });
    const session = await runtime.store.sessions.ensureActive('agent:main:main', 'main');
    const ref = { sessionId: session.id, sessionKey: session.sessionKey, agentId: 'main' };
    await runtime.memory.append(ref, { role: 'user', content: 'Cut off.', metadata: { runId: 'cut-1' } });
    await runtime.store.sessions.markRunning(session.id, { runId: 'cut-1', startedAt: Date.now() });
    const pending = {
      runId: 'waiting-1',
      sessionKey: 'agent:main:main',
      agentId: 'main',
      text: 'Still there?',
      receivedAt: Date.now(),
    };
    await runtime.store.kv.set('chat-inbox', pending.runId, JSON.stringify(pending));
    await runtime.close();

    runtime = await createRuntime({
      config,
      env: {},
      model: createScriptedModel({ steps: [{ text: 'Yes.' }] }),
      logDestination: captureLog().stream,
    });
    // Not resumed: neither run is known.
    await expect(runtime.chat.wait('cut-1')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    const resumed = runtime.resumeChat();
    expect(runtime.resumeChat()).toBe(resumed);
    expect(await resumed).toEqual(['waiting-1']);
    expect(await runtime.chat.wait('cut-1')).toMatchObject({
      status: 'error',
      error: { code: 'RUN_INTERRUPTED' },
    });
    expect(await runtime.chat.wait('waiting-1')).toMatchObject({ status: 'completed', text: 'Yes.' });
    expect(await runtime.store.sessions.listRunning()).toEqual([]);
    expect(await runtime.store.kv.list('chat-inbox')).toEqual([]);
  });

  it('plans a goal and runs a workflow in-process, with no gateway', async () => {
    const home = tempHome();
    runtime = await createRuntime({
      config: loadConfig({ cwd: home, env: { AGENTD_HOME: home } }),
      env: {},
      logDestination: captureLog().stream,
    });
    await runtime.startBackground();
    const completed = new Promise<void>((resolve) => {
      let count = 0;
      runtime!.bus.on('work:completed', () => {
        if (++count === 2) resolve();
      });
    });
    const plan = await runtime.goal({ text: 'Collect the open questions. Then list the risks.' });
    expect(plan).toMatch(/1\. .+\n2\. /);
    await completed;

    const dir = join(runtime.state.workspaceDir, 'mini-editor');
    cpSync(join(import.meta.dirname, '..', '..', 'examples', 'mini-editor'), dir, { recursive: true });
    const run = await runtime.runWorkflow({ dir, input: { request: 'Create a note about tide pools' } });
    expect(run.result).toMatchObject({ status: 'success', output: { title: expect.any(String) } });
  });
});
