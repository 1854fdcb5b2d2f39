import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  createHookPipeline,
  createPolicy,
  createToolRegistry,
  defineTool,
  executeToolCall,
  executeToolCallTo,
  type ToolCallOutcome,
} from '../../src/tools/index.js';
import { UserInputError } from '../../src/util/index.js';
import { brittleTool } from '../helpers/tools.js';
import { createToolContext } from './helpers.js';

function setup() {
  const executed: Array<Record<string, unknown>> = [];
  const save = defineTool({
    name: 'save',
    description: 'save a note',
    input: z.object({ path: z.string().min(1), text: z.string() }),
    policyResource: (args) => args.path,
    execute: async (args) => {
      executed.push(args);
      return {
        content: `saved ${args.path}`,
        metadata: { ledgerEntry: { workItemId: 'w', seq: 1, entryType: 'note', content: 'x' } },
      };
    },
  });
  const fail = defineTool({
    name: 'fail',
    description: 'always fails',
    input: z.object({}),
    execute: async () => {
      throw new UserInputError({ code: 'NOPE', message: 'did not work' });
    },
  });
  const stuck = defineTool({
    name: 'stuck',
    description: 'ignores its abort signal',
    input: z.object({}),
    execute: () => new Promise<string>(() => {}),
  });
  const registry = createToolRegistry([save, fail, stuck]);
  return { registry, executed };
}

describe('executeToolCall', () => {
  it('runs a valid call and keeps metadata out of the content', async () => {
    const { registry, executed } = setup();
    const outcome = await executeToolCall(
      { id: 'c1', name: 'save', arguments: { path: 'a.md', text: 'hi' } },
      { registry, context: createToolContext('/tmp') },
    );
    expect(outcome).toMatchObject({
      toolCallId: 'c1',
      status: 'ok',
      isError: false,
      content: 'saved a.md',
      metadata: { ledgerEntry: { seq: 1 } },
    });
    expect(executed).toEqual([{ path: 'a.md', text: 'hi' }]);
  });

  it('turns unknown tools, disallowed tools, bad JSON and invalid arguments into readable is_error results', async () => {
    const { registry, executed } = setup();
    const context = createToolContext('/tmp');
    expect(
      await executeToolCall({ id: 'c', name: 'nope', arguments: {} }, { registry, context }),
    ).toMatchObject({
      status: 'unknown_tool',
      isError: true,
      content: 'Unknown tool "nope". Available tools: save, fail, stuck.',
    });
    expect(
      await executeToolCall(
        { id: 'c', name: 'save', arguments: { path: 'a', text: 'b' } },
        { registry, context, allowedNames: new Set(['fail']) },
      ),
    ).toMatchObject({ status: 'unknown_tool', content: expect.stringContaining('Available tools: fail') });
    expect(
      await executeToolCall(
        { id: 'c', name: 'save', arguments: { __raw: '{"path": ' } },
        { registry, context },
      ),
    ).toMatchObject({
      status: 'invalid_arguments',
      content: expect.stringContaining('not valid JSON'),
    });
    expect(
      await executeToolCall({ id: 'c', name: 'save', arguments: { path: '' } }, { registry, context }),
    ).toMatchObject({
      status: 'invalid_arguments',
      content: expect.stringMatching(/^Invalid arguments for save: path: .*; text: /),
    });
    expect(executed).toEqual([]);
  });

  it('reports a thrown error as an is_error result with its code, and tells on_error hooks', async () => {
    const { registry } = setup();
    const seen: unknown[] = [];
    const hooks = createHookPipeline({
      hooks: [{ name: 'watch', events: ['on_error'], handle: (_event, payload) => void seen.push(payload) }],
    });
    const outcome = await executeToolCall(
      { id: 'c', name: 'fail', arguments: {} },
      { registry, hooks, context: createToolContext('/tmp') },
    );
    expect(outcome).toMatchObject({
      status: 'error',
      isError: true,
      content: 'fail failed: NOPE: did not work',
    });
    expect(seen).toEqual([
      expect.objectContaining({
        where: 'tool',
        toolName: 'fail',
        error: { code: 'NOPE', message: 'did not work' },
      }),
    ]);
  });

  it('a policy denial is reported to the model and the bus and never runs the tool', async () => {
    const { registry, executed } = setup();
    const context = createToolContext('/tmp');
    const policy = createPolicy({
      policies: [
        {
          name: 'p',
          rules: [{ target_id: 'save', resource: 'etc/*', action: 'deny', reason: 'read-only area' }],
        },
      ],
    });
    const outcome = await executeToolCall(
      { id: 'c9', name: 'save', arguments: { path: 'etc/passwd', text: 'x' } },
      { registry, policy, context },
    );
    expect(outcome).toMatchObject({
      status: 'denied',
      isError: true,
      content: 'Policy denied save: read-only area. The call was not run.',
    });
    expect(executed).toEqual([]);
    expect(context.events.map((event) => [event.type, event.data])).toEqual([
      [
        'tool:policy-denied',
        {
          runId: 'run_1',
          agentId: 'main',
          toolCallId: 'c9',
          toolName: 'save',
          reason: 'read-only area',
          rule: 'p#0',
        },
      ],
    ]);
  });

  it('policy sees the arguments after a hook patch, so a patch cannot smuggle a denied target', async () => {
    const { registry, executed } = setup();
    const hooks = createHookPipeline({
      hooks: [
        {
          name: 'redirect',
          events: ['before_tool_call'],
          handle: () => ({ action: 'modify', patch: { arguments: { path: 'etc/x', text: 'y' } } }),
        },
      ],
    });
    const policy = createPolicy({
      policies: [{ name: 'p', rules: [{ target_id: 'save', resource: 'etc/*', action: 'deny' }] }],
    });
    const outcome = await executeToolCall(
      { id: 'c', name: 'save', arguments: { path: 'ok.md', text: 'y' } },
      { registry, hooks, policy, context: createToolContext('/tmp') },
    );
    expect(outcome.status).toBe('denied');
    expect(executed).toEqual([]);
  });

  it('re-validates patched arguments and lets after hooks rewrite or withhold results', async () => {
    const { registry, executed } = setup();
    const badPatch = createHookPipeline({
      hooks: [
        {
          name: 'bad',
          events: ['before_tool_call'],
          handle: () => ({ action: 'modify', patch: { arguments: { path: 7 } } }),
        },
      ],
    });
    expect(
      await executeToolCall(
        { id: 'c', name: 'save', arguments: { path: 'a', text: 'b' } },
        { registry, hooks: badPatch, context: createToolContext('/tmp') },
      ),
    ).toMatchObject({ status: 'invalid_arguments', content: expect.stringContaining('after patch by bad') });

    const context = createToolContext('/tmp');
    const withhold = createHookPipeline({
      hooks: [
        {
          name: 'dlp',
          events: ['after_tool_call'],
          handle: () => ({ action: 'block', reason: 'looks like a key' }),
        },
      ],
    });
    const outcome = await executeToolCall(
      { id: 'c', name: 'save', arguments: { path: 'a', text: 'b' } },
      { registry, hooks: withhold, context },
    );
    expect(outcome).toMatchObject({
      status: 'blocked',
      isError: true,
      content: 'Result withheld by hook dlp: looks like a key',
      metadata: { ledgerEntry: { seq: 1 } },
    });
    expect(executed).toHaveLength(1);
    expect(context.events.map((event) => event.type)).toEqual(['tool:hook-blocked']);
  });

  it('returns at abort even when the tool ignores its signal', async () => {
    const { registry } = setup();
    const controller = new AbortController();
    const pending = executeToolCall(
      { id: 'c', name: 'stuck', arguments: {} },
      { registry, context: createToolContext('/tmp', { signal: controller.signal }) },
    );
    controller.abort();
    expect(await pending).toMatchObject({ status: 'aborted', isError: true });
  });

  it('cuts results longer than maxResultChars', async () => {
    const big = defineTool({
      name: 'big',
      description: 'b',
      input: z.object({}),
      execute: async () => 'x'.repeat(100),
    });
    const outcome = await executeToolCall(
      { id: 'c', name: 'big', arguments: {} },
      { registry: createToolRegistry([big]), context: createToolContext('/tmp'), maxResultChars: 10 },
    );
    expect(outcome.content).toBe('xxxxxxxxxx\n[… truncated 90 of 100 characters]');
  });

  it('runs an ask-first call only when the approver says yes, and refuses it without one', async () => {
    const { registry, executed } = setup();
    const policy = createPolicy({ policies: [{ name: 'p', rules: [{ target_id: 'save', action: 'ask' }] }] });
    const call = { id: 'c1', name: 'save', arguments: { path: 'a.md', text: 'hi' } };
    const asked: string[] = [];
    const approve = async (request: { toolName: string; arguments: Record<string, unknown> }) => {
      asked.push(`${request.toolName}:${String(request.arguments.path)}`);
      return asked.length === 1;
    };
    const context = createToolContext('/tmp');
    expect((await executeToolCall(call, { registry, policy, approve, context })).status).toBe('ok');
    const refused = await executeToolCall(call, { registry, policy, approve, context });
    expect(refused).toMatchObject({ status: 'denied', isError: true });
    expect(refused.content).toContain('the user did not approve it');
    const nobody = await executeToolCall(call, { registry, policy, context });
    expect(nobody.content).toContain('nobody can be asked');
    expect(asked).toEqual(['save:a.md', 'save:a.md']);
    expect(executed).toHaveLength(1);
    expect(context.events.filter((event) => event.type === 'tool:policy-denied')).toHaveLength(2);
  });

  it('executeToolCallTo hands each outcome to the sink once, with its slot, never synchronously', async () => {
    const { registry } = setup();
    const controller = new AbortController();
    const context = createToolContext('/tmp', { signal: controller.signal });
    const landed: Array<[number, ToolCallOutcome]> = [];
    const sink = {
      onOutcome: (outcome: ToolCallOutcome, slot: number) => landed.push([slot, outcome]),
      onFailure: (error: unknown) => {
        throw error;
      },
    };
    executeToolCallTo(
      { id: 'a', name: 'save', arguments: { path: 'a.md', text: '' } },
      { registry, context },
      sink,
      4,
    );
    executeToolCallTo({ id: 'b', name: 'nope', arguments: {} }, { registry, context }, sink, 5);
    executeToolCallTo({ id: 'c', name: 'stuck', arguments: {} }, { registry, context }, sink, 6);
    expect(landed).toEqual([]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(landed.map(([slot, outcome]) => [slot, outcome.status])).toEqual([
      [4, 'ok'],
      [5, 'unknown_tool'],
    ]);
    // The stuck call ends at the abort, once, however often the signal's listeners run.
    controller.abort();
    controller.signal.dispatchEvent(new Event('abort'));
    await new Promise((resolve) => setImmediate(resolve));
    expect(landed.map(([slot, outcome]) => [slot, outcome.status])).toEqual([
      [4, 'ok'],
      [5, 'unknown_tool'],
      [6, 'aborted'],
    ]);
  });

  it('a pipeline that throws (here a schema) rejects executeToolCall and reaches the sink as a failure', async () => {
    const brittle = brittleTool();
    const registry = createToolRegistry([brittle]);
    const context = createToolContext('/tmp');
    await expect(
      executeToolCall({ id: 'c', name: 'brittle', arguments: {} }, { registry, context }),
    ).rejects.toThrow('schema exploded');
    const failure = await new Promise<[unknown, number]>((resolve) =>
      executeToolCallTo(
        { id: 'c', name: 'brittle', arguments: {} },
        { registry, context },
        { onOutcome: () => resolve([undefined, -1]), onFailure: (error, slot) => resolve([error, slot]) },
        3,
      ),
    );
    expect(failure).toEqual([expect.objectContaining({ message: 'schema exploded' }), 3]);
  });

  it('races the call against abortSignal when given, and neither checks nor races a null one', async () => {
    const { registry } = setup();
    const runAborted = new AbortController();
    runAborted.abort();
    const unabortable = await executeToolCall(
      { id: 'c', name: 'save', arguments: { path: 'a.md', text: '' } },
      {
        registry,
        context: createToolContext('/tmp', { signal: runAborted.signal }),
        abortSignal: null,
      },
    );
    expect(unabortable).toMatchObject({ status: 'ok' });
    const fresh = new AbortController();
    const other = new AbortController();
    const pending = executeToolCall(
      { id: 'c', name: 'stuck', arguments: {} },
      { registry, context: createToolContext('/tmp', { signal: fresh.signal }), abortSignal: other.signal },
    );
    expect(getEventListeners(fresh.signal, 'abort')).toHaveLength(0);
    other.abort();
    expect(await pending).toMatchObject({ status: 'aborted' });
  });
});
