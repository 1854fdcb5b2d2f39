import { getEventListeners } from 'node:events';
import { describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { createPolicy, defineTool } from '../../src/tools/index.js';
import { LazyAbortController } from '../../src/util/index.js';
import { brittleTool } from '../helpers/tools.js';
import { createHarness, deferred, nextEvent } from './helpers.js';

describe('engage loop: basics', () => {
  it('streams text, finishes on end of turn, and publishes the run lifecycle in order', async () => {
    const harness = await createHarness({
      model: { steps: [{ text: ['Hel', 'lo!'], usage: { inputTokens: 12, outputTokens: 3 } }] },
    });
    const result = await harness.run({
      pricing: { inputUsdPerMTok: 1_000_000, outputUsdPerMTok: 2_000_000 },
    });
    expect(result).toMatchObject({
      status: 'completed',
      text: 'Hello!',
      turns: 1,
      newMessages: [{ role: 'assistant', content: 'Hello!' }],
      usage: { inputTokens: 12, outputTokens: 3, costUsd: 18 },
    });
    expect(
      harness.events.map((event) => [event.type, event.runId, event.sessionKey, event.workItemId]),
    ).toEqual([
      ['run:started', 'run_1', 'agent:main:main', 'work_1'],
      ['run:text-delta', 'run_1', 'agent:main:main', 'work_1'],
      ['run:text-delta', 'run_1', 'agent:main:main', 'work_1'],
      ['run:finished', 'run_1', 'agent:main:main', 'work_1'],
    ]);
    expect(harness.events[2]!.data).toEqual({ runId: 'run_1', delta: 'lo!', text: 'Hello!' });
    expect(harness.events[3]!.data).toMatchObject({ status: 'completed', text: 'Hello!', turns: 1 });
    const request = harness.model.requests[0]!;
    expect(request.messages).toEqual([
      { role: 'system', content: 'You are a test agent.' },
      { role: 'user', content: 'Do the task.' },
    ]);
    expect(request.tools?.map((tool) => tool.name)).toEqual([
      'ledger_append',
      'ledger_read',
      'read_file',
      'write_file',
      'edit_file',
      'list_files',
      'grep',
      'noop',
    ]);
    harness.model.assertAllConsumed();
  });

  it('offers only the allowed tools and refuses calls to others without running them', async () => {
    const harness = await createHarness({
      model: {
        steps: [
          { toolCalls: [{ name: 'write_file', arguments: { path: 'x.txt', content: 'x' } }] },
          { text: 'ok' },
        ],
      },
    });
    const result = await harness.run({ tools: { registry: harness.registry, names: ['noop'] } });
    expect(harness.model.requests[0]!.tools?.map((tool) => tool.name)).toEqual(['noop']);
    expect(result.newMessages[1]).toMatchObject({
      role: 'tool',
      isError: true,
      content: 'Unknown tool "write_file". Available tools: noop.',
    });
  });

  it('returns invalid arguments to the model as an is_error result and continues', async () => {
    const harness = await createHarness({
      model: {
        steps: [{ toolCalls: [{ id: 't1', name: 'noop', arguments: { n: 'seven' } }] }, { text: 'fixed' }],
      },
    });
    const result = await harness.run();
    expect(result.status).toBe('completed');
    expect(harness.model.requests[1]!.messages.at(-1)).toEqual({
      role: 'tool',
      toolCallId: 't1',
      toolName: 'noop',
      content: 'Invalid arguments for noop: n: Invalid input: expected number, received string',
      isError: true,
    });
  });

  it('stops at maxTurns with a clear status, not a crash, and notes it in the ledger', async () => {
    const harness = await createHarness({
      model: { steps: [1, 2, 3].map((n) => ({ toolCalls: [{ name: 'noop', arguments: { n } }] })) },
    });
    const result = await harness.run({ limits: { maxTurns: 3 } });
    expect(result).toMatchObject({ status: 'max_turns', turns: 3, error: { code: 'MAX_TURNS' } });
    expect(result.newMessages.map((message) => message.role)).toEqual([
      'assistant',
      'tool',
      'assistant',
      'tool',
      'assistant',
      'tool',
    ]);
    expect((await harness.ledger.read('work_1')).map((entry) => entry.entryType)).toEqual(['note']);
    harness.model.assertAllConsumed();
  });

  it('ends with status error and the provider code on a fatal provider error', async () => {
    const harness = await createHarness({
      model: {
        steps: [
          { toolCalls: [{ name: 'noop', arguments: {} }] },
          { text: 'partial', error: { code: 'PROVIDER_AUTH', message: 'bad key' } },
        ],
      },
    });
    const result = await harness.run();
    expect(result).toMatchObject({
      status: 'error',
      error: { code: 'PROVIDER_AUTH', message: 'bad key', retryable: false },
      turns: 2,
    });
    expect(result.newMessages.at(-1)).toEqual({ role: 'assistant', content: 'partial' });
    expect(await harness.ledger.read('work_1', { entryType: 'error' })).toHaveLength(1);
    expect(harness.events.at(-1)).toMatchObject({
      type: 'run:finished',
      data: { status: 'error', error: { code: 'PROVIDER_AUTH' } },
    });
  });

  it('stops cleanly at the token budget without running the requested tools', async () => {
    let ran = 0;
    const counted = defineTool({
      name: 'counted',
      description: 'c',
      input: z.object({}),
      execute: async () => `run ${++ran}`,
    });
    const harness = await createHarness({
      tools: [counted],
      model: {
        steps: [
          { toolCalls: [{ name: 'counted', arguments: {} }], usage: { inputTokens: 500, outputTokens: 100 } },
          { toolCalls: [{ name: 'counted', arguments: {} }], usage: { inputTokens: 700, outputTokens: 100 } },
        ],
      },
    });
    const result = await harness.run({ limits: { tokenBudget: 1000 } });
    expect(result).toMatchObject({
      status: 'budget_exceeded',
      turns: 2,
      usage: { inputTokens: 1200, outputTokens: 200 },
      error: { code: 'BUDGET_EXCEEDED' },
    });
    expect(ran).toBe(1);
    expect(result.newMessages.at(-1)).toMatchObject({
      role: 'tool',
      isError: true,
      content: 'Not run: the run reached its token or cost budget.',
    });
  });

  it('beforeFinish sees the result before run:finished is published; if it fails the run fails', async () => {
    const harness = await createHarness({ model: { steps: [{ text: 'saved?' }, { text: 'again' }] } });
    const seen: string[] = [];
    const result = await harness.run({
      beforeFinish: async (outcome) => {
        seen.push(
          `${outcome.status}:${outcome.newMessages.length}:${harness.events.some((event) => event.type === 'run:finished')}`,
        );
      },
    });
    expect(seen).toEqual(['completed:1:false']);
    expect(result.status).toBe('completed');
    const failed = await harness.run({
      beforeFinish: async () => {
        throw new Error('disk full');
      },
    });
    expect(failed).toMatchObject({ status: 'error', error: { code: 'INTERNAL', message: 'disk full' } });
    expect(harness.events.at(-1)).toMatchObject({ type: 'run:finished', data: { status: 'error' } });
  });

  it('refuses a cost budget without pricing', async () => {
    const harness = await createHarness();
    await expect(harness.run({ limits: { costBudgetUsd: 1 } })).rejects.toThrow(/pricing/);
  });
});

describe('engage loop: parallel tools', () => {
  it('runs the calls of one turn concurrently and keeps transcript order = call order', async () => {
    const gates = new Map<string, ReturnType<typeof deferred<void>>>();
    const started: string[] = [];
    const allStarted = deferred();
    const gated = defineTool({
      name: 'gated',
      description: 'waits for the test',
      input: z.object({ id: z.string() }),
      async execute(args) {
        started.push(args.id);
        const gate = deferred();
        gates.set(args.id, gate);
        if (gates.size === 3) allStarted.resolve();
        await gate.promise;
        return `done ${args.id}`;
      },
    });
    const harness = await createHarness({
      tools: [gated],
      model: {
        steps: [
          {
            toolCalls: ['a', 'b', 'c'].map((id) => ({ id: `call_${id}`, name: 'gated', arguments: { id } })),
          },
          { text: 'all done' },
        ],
      },
    });
    const running = harness.run();
    // All three are in flight at once: none has been released yet.
    await allStarted.promise;
    expect(started).toEqual(['a', 'b', 'c']);
    for (const id of ['c', 'b', 'a']) {
      const finished = nextEvent(
        harness.bus,
        'run:tool-finished',
        (event) => (event.data as { toolCallId: string }).toolCallId === `call_${id}`,
      );
      gates.get(id)!.resolve();
      await finished;
    }
    const result = await running;
    expect(result.status).toBe('completed');
    expect(
      result.newMessages.filter((message) => message.role === 'tool').map((message) => message.content),
    ).toEqual(['done a', 'done b', 'done c']);
    const finishedOrder = harness.events
      .filter((event) => event.type === 'run:tool-finished')
      .map((event) => (event.data as { toolCallId: string }).toolCallId);
    expect(finishedOrder).toEqual(['call_c', 'call_b', 'call_a']);
  });

  it('calls in flight at once share one abort listener on the run signal, however many there are', async () => {
    // Node warns (MaxListenersExceededWarning) past 10 listeners on one signal; a turn of 12 calls must not
    // add one per call.
    const listenersWhileRunning: number[] = [];
    const runTurn = async (calls: number) => {
      const release = deferred();
      let started = 0;
      const allStarted = deferred();
      let runSignal: AbortSignal | undefined;
      const gated = defineTool({
        name: 'gated',
        description: 'waits for the test',
        input: z.object({ n: z.number() }),
        async execute(_args, context) {
          runSignal = context.signal;
          if (++started === calls) allStarted.resolve();
          await release.promise;
          return 'done';
        },
      });
      const harness = await createHarness({
        tools: [gated],
        model: {
          steps: [
            {
              toolCalls: Array.from({ length: calls }, (_, n) => ({
                id: `call_${n}`,
                name: 'gated',
                arguments: { n },
              })),
            },
            { text: 'all done' },
          ],
        },
      });
      const controller = new AbortController();
      const running = harness.run({
        signal: controller.signal,
        limits: { maxParallelTools: calls },
      });
      await allStarted.promise;
      listenersWhileRunning.push(getEventListeners(runSignal!, 'abort').length);
      release.resolve();
      expect((await running).status).toBe('completed');
      expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    };
    await runTurn(2);
    await runTurn(12);
    expect(listenersWhileRunning[1]).toBe(listenersWhileRunning[0]);
    // One for the tool calls racing the signal, one for the model calls streaming under it.
    expect(listenersWhileRunning[1]).toBeLessThanOrEqual(2);
  });

  it('a tool pipeline that throws ends the run as an error, with the calls all in flight or under the semaphore', async () => {
    const brittle = brittleTool();
    for (const maxParallelTools of [8, 1]) {
      const harness = await createHarness({
        tools: [brittle],
        model: {
          steps: [
            {
              toolCalls: [
                { name: 'noop', arguments: {} },
                { name: 'brittle', arguments: {} },
              ],
            },
            { text: 'unreachable' },
          ],
        },
      });
      const result = await harness.run({ limits: { maxParallelTools } });
      expect(result).toMatchObject({ status: 'error', error: { message: 'schema exploded' } });
    }
  });

  it('maxParallelTools bounds concurrency (1 = sequential)', async () => {
    let active = 0;
    let peak = 0;
    const log: string[] = [];
    const tracked = defineTool({
      name: 'tracked',
      description: 't',
      input: z.object({ id: z.number() }),
      async execute(args) {
        active++;
        peak = Math.max(peak, active);
        log.push(`start ${args.id}`);
        // Yield several times so overlapping calls would interleave.
        for (let index = 0; index < 5; index++) await Promise.resolve();
        log.push(`end ${args.id}`);
        active--;
        return 'ok';
      },
    });
    for (const [limit, expectedPeak] of [
      [1, 1],
      [2, 2],
      [8, 4],
    ] as const) {
      active = 0;
      peak = 0;
      log.length = 0;
      const harness = await createHarness({
        tools: [tracked],
        model: {
          steps: [
            { toolCalls: [1, 2, 3, 4].map((id) => ({ name: 'tracked', arguments: { id } })) },
            { text: 'ok' },
          ],
        },
      });
      await harness.run({ limits: { maxParallelTools: limit } });
      expect(peak).toBe(expectedPeak);
      if (limit === 1)
        expect(log).toEqual(['start 1', 'end 1', 'start 2', 'end 2', 'start 3', 'end 3', 'start 4', 'end 4']);
    }
  });
});

/** A tool that waits until its signal aborts; `sawAbort()` tells whether it heard the abort. */
function abortWaiter() {
  let heard = false;
  const waiter = defineTool({
    name: 'wait_for_abort',
    description: 'w',
    input: z.object({}),
    execute: (_args, context) =>
      new Promise<string>((resolve) => {
        context.signal.addEventListener('abort', () => {
          heard = true;
          resolve('stopped');
        });
      }),
  });
  return { waiter, sawAbort: () => heard };
}

describe('engage loop: abort', () => {
  it('aborts mid-tool: the tool gets the signal, the run ends aborted with a consistent transcript', async () => {
    const { waiter, sawAbort } = abortWaiter();
    const harness = await createHarness({
      tools: [waiter],
      model: {
        steps: [
          {
            toolCalls: [
              { id: 'w1', name: 'wait_for_abort', arguments: {} },
              { id: 'n1', name: 'noop', arguments: {} },
            ],
          },
        ],
      },
    });
    const controller = new AbortController();
    const started = nextEvent(
      harness.bus,
      'run:tool-started',
      (event) => (event.data as { toolName: string }).toolName === 'wait_for_abort',
    );
    const noopDone = nextEvent(
      harness.bus,
      'run:tool-finished',
      (event) => (event.data as { toolName: string }).toolName === 'noop',
    );
    const running = harness.run({ signal: controller.signal });
    await Promise.all([started, noopDone]);
    controller.abort();
    const result = await running;
    expect(sawAbort()).toBe(true);
    expect(result).toMatchObject({ status: 'aborted', error: { code: 'ABORTED' }, turns: 1 });
    expect(result.newMessages).toEqual([
      expect.objectContaining({ role: 'assistant', toolCalls: expect.any(Array) }),
      {
        role: 'tool',
        toolCallId: 'w1',
        toolName: 'wait_for_abort',
        content: 'The run was aborted while this tool was running.',
        isError: true,
      },
      { role: 'tool', toolCallId: 'n1', toolName: 'noop', content: 'ok' },
    ]);
    expect(harness.events.at(-1)).toMatchObject({ type: 'run:finished', data: { status: 'aborted' } });
  });

  it('aborts mid-stream', async () => {
    const harness = await createHarness({ model: { steps: [{ hang: true }] } });
    const controller = new AbortController();
    const started = nextEvent(harness.bus, 'run:started');
    const running = harness.run({ signal: controller.signal });
    await started;
    controller.abort();
    expect(await running).toMatchObject({ status: 'aborted', newMessages: [] });
  });

  it('an already aborted signal makes no model call', async () => {
    const harness = await createHarness();
    const result = await harness.run({ signal: AbortSignal.abort() });
    expect(result.status).toBe('aborted');
    expect(harness.model.requests).toHaveLength(0);
  });
});

describe("engage loop: abort through a lazy controller (a chat turn's)", () => {
  it("aborts mid-stream without ever making the caller's signal", async () => {
    const harness = await createHarness({ model: { steps: [{ hang: true }] } });
    const controller = new LazyAbortController();
    const made = vi.spyOn(controller, 'signal', 'get');
    const started = nextEvent(harness.bus, 'run:started');
    const running = harness.run({ signal: controller });
    await started;
    controller.abort();
    expect(await running).toMatchObject({ status: 'aborted', error: { code: 'ABORTED' }, newMessages: [] });
    expect(made).not.toHaveBeenCalled();
  });

  it("aborts mid-tool: the tool's signal (the run's own) aborts with the controller", async () => {
    const { waiter, sawAbort } = abortWaiter();
    const harness = await createHarness({
      tools: [waiter],
      model: { steps: [{ toolCalls: [{ id: 'w1', name: 'wait_for_abort', arguments: {} }] }] },
    });
    const controller = new LazyAbortController();
    const started = nextEvent(harness.bus, 'run:tool-started');
    const running = harness.run({ signal: controller });
    await started;
    controller.abort();
    const result = await running;
    expect(sawAbort()).toBe(true);
    expect(result).toMatchObject({ status: 'aborted', error: { code: 'ABORTED' } });
  });

  it('an already aborted controller makes no model call, and a finished run leaves no listener on it', async () => {
    const harness = await createHarness();
    const aborted = new LazyAbortController();
    aborted.abort();
    expect((await harness.run({ signal: aborted })).status).toBe('aborted');
    expect(harness.model.requests).toHaveLength(0);

    const second = await createHarness({ model: { steps: [{ text: 'hi' }] } });
    const controller = new LazyAbortController();
    const added = vi.spyOn(controller, 'onAbort');
    const removed = vi.spyOn(controller, 'offAbort');
    expect((await second.run({ signal: controller })).status).toBe('completed');
    // The model call followed the controller and took its listener off when it ended.
    expect(added).toHaveBeenCalledTimes(1);
    expect(removed.mock.calls).toEqual(added.mock.calls);
  });
});

describe('engage loop: policy', () => {
  it('a denied call is never run, is reported to the model as is_error and to the bus', async () => {
    const harness = await createHarness({
      model: {
        steps: [
          {
            toolCalls: [
              { id: 'w', name: 'write_file', arguments: { path: 'secrets/key.txt', content: 'x' } },
            ],
          },
          { text: 'understood' },
        ],
      },
    });
    const policy = createPolicy({
      policies: [
        {
          name: 'guard',
          rules: [{ target_id: 'write_file', resource: 'secrets/*', action: 'deny', reason: 'no secrets' }],
        },
      ],
    });
    const result = await harness.run({ policy });
    expect(result.newMessages[1]).toMatchObject({
      role: 'tool',
      isError: true,
      content: 'Policy denied write_file: no secrets. The call was not run.',
    });
    const denied = harness.events.find((event) => event.type === 'tool:policy-denied');
    expect(denied).toMatchObject({
      runId: 'run_1',
      workItemId: 'work_1',
      data: { toolName: 'write_file', toolCallId: 'w', rule: 'guard#0' },
    });
    const { readdir } = await import('node:fs/promises');
    expect(await readdir(harness.workspaceDir)).toEqual([]);
  });
});
