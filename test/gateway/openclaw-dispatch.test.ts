import { afterEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { acceptedThenFinal, createMethodTable } from '../../src/gateway/index.js';
import { createOpenClawDispatcher, heldEventsMaxWaitMs } from '../../src/gateway/openclaw-dispatch.js';
import { silentLogger } from '../../src/util/index.js';
import { testMethodContext } from './helpers.js';

const context = testMethodContext(['operator.write']);

/** A dispatcher over a recording socket: frames and pings land in `wire`, in order. */
function setup(options: { maxPendingRequests?: number } = {}) {
  const table = createMethodTable();
  const wire: Array<Record<string, unknown>> = [];
  const pings: string[] = [];
  /** Whether each ping came in the same synchronous step as the frame before it (so in its socket write). */
  const pingsWithFrame: boolean[] = [];
  let frameStep = 0;
  let open = true;
  let finishAgent: (value: unknown) => void = () => undefined;
  table.register('echo', { scopes: [], params: z.looseObject({ text: z.string() }), handler: (p) => p.text });
  table.register('hang', {
    scopes: [],
    params: z.looseObject({}),
    handler: () => new Promise(() => undefined),
  });
  table.register('chat.send', {
    scopes: [],
    params: z.looseObject({ fail: z.boolean().optional() }),
    handler(params) {
      // The run's first event is produced before the handler even returns.
      dispatcher.whenNotHolding(() => wire.push({ event: 'agent:start' }));
      if (params.fail) throw new Error('boom');
      return { runId: 'r1', status: 'started' };
    },
  });
  table.register('agent', {
    scopes: [],
    params: z.looseObject({}),
    handler: () =>
      acceptedThenFinal(
        { status: 'accepted' },
        new Promise((resolve) => {
          finishAgent = resolve;
        }),
      ),
  });
  const dispatcher = createOpenClawDispatcher({
    table,
    context,
    send(frame) {
      if (!open) return false;
      wire.push(frame);
      const step = ++frameStep;
      queueMicrotask(() => {
        if (frameStep === step) frameStep = 0;
      });
      return true;
    },
    isOpen: () => open,
    ping(token) {
      pingsWithFrame.push(frameStep !== 0);
      pings.push(token);
      wire.push({ ping: token });
    },
    maxPendingRequests: options.maxPendingRequests ?? 16,
    maxHeldBytes: 8 * 1024 * 1024,
    overflow: () => undefined,
    logger: silentLogger,
  });
  const request = (id: string, method: string, params: unknown = {}) =>
    dispatcher.onFrame(JSON.stringify({ type: 'req', id, method, params }));
  return {
    dispatcher,
    wire,
    pings,
    pingsWithFrame,
    request,
    finishAgent: (value: unknown) => finishAgent(value),
    close: () => {
      open = false;
    },
  };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 0));

describe('OpenClaw dispatcher', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('answers requests, refuses malformed ones that carry an id, ignores the rest', async () => {
    const { wire, request, dispatcher } = setup();
    request('1', 'echo', { text: 'hi' });
    dispatcher.onFrame('not json {');
    dispatcher.onFrame(JSON.stringify({ type: 'req', method: 'echo' }));
    dispatcher.onFrame(JSON.stringify({ type: 'req', id: '2' }));
    request('3', 'connect');
    request('4', 'no.such');
    await settle();
    // Requests run concurrently: answers come in any order, one per request that carried an id.
    expect(wire).toHaveLength(4);
    expect(wire).toEqual(
      expect.arrayContaining([
        {
          type: 'res',
          id: '2',
          ok: false,
          error: expect.objectContaining({
            code: 'INVALID_REQUEST',
            message: expect.stringMatching(/^invalid request frame/),
          }),
        },
        {
          type: 'res',
          id: '3',
          ok: false,
          error: { code: 'INVALID_REQUEST', message: 'already connected', retryable: false },
        },
        { type: 'res', id: '1', ok: true, payload: 'hi' },
        { type: 'res', id: '4', ok: false, error: expect.objectContaining({ code: 'INVALID_REQUEST' }) },
      ]),
    );
  });

  it('refuses requests beyond the in-flight limit with a retryable UNAVAILABLE', async () => {
    const { wire, request } = setup({ maxPendingRequests: 1 });
    request('1', 'hang');
    request('2', 'echo', { text: 'x' });
    await settle();
    expect(wire).toEqual([
      {
        type: 'res',
        id: '2',
        ok: false,
        error: expect.objectContaining({ code: 'UNAVAILABLE', retryable: true }),
      },
    ]);
  });

  it('holds run events from a run-starting request until the pong after its answer', async () => {
    const { wire, pings, pingsWithFrame, request, dispatcher } = setup();
    request('1', 'chat.send');
    await settle();
    // Answer, then the ping, sent with it (one socket write); the run's event waits.
    expect(wire).toEqual([
      { type: 'res', id: '1', ok: true, payload: { runId: 'r1', status: 'started' } },
      { ping: pings[0] },
    ]);
    expect(pingsWithFrame).toEqual([true]);
    dispatcher.whenNotHolding(() => wire.push({ event: 'chat:final' }));
    dispatcher.onPong('some other pong');
    expect(wire).toHaveLength(2);
    dispatcher.onPong(pings[0]!);
    expect(wire.slice(2)).toEqual([{ event: 'agent:start' }, { event: 'chat:final' }]);
    // Nothing is held afterwards.
    dispatcher.whenNotHolding(() => wire.push({ event: 'later' }));
    expect(wire.at(-1)).toEqual({ event: 'later' });
  });

  it('releases held events right after a refused run-starting request, and for clients that never pong', async () => {
    vi.useFakeTimers();
    const { wire, request } = setup();
    // Refused: no ping, and what was held while it ran follows its error.
    request('1', 'chat.send', { fail: true });
    await vi.advanceTimersByTimeAsync(0);
    expect(wire.map((frame) => frame.id ?? frame.event ?? 'ping')).toEqual(['1', 'agent:start']);
    request('2', 'chat.send');
    await vi.advanceTimersByTimeAsync(0);
    expect(wire.slice(2).map((frame) => frame.id ?? frame.event ?? 'ping')).toEqual(['2', 'ping']);
    await vi.advanceTimersByTimeAsync(heldEventsMaxWaitMs);
    expect(wire.at(-1)).toEqual({ event: 'agent:start' });
  });

  it('sends the final answer of a two-phase request after the events held before it', async () => {
    const { wire, pings, request, dispatcher, finishAgent } = setup();
    request('1', 'agent');
    await settle();
    dispatcher.whenNotHolding(() => wire.push({ event: 'chat:final' }));
    finishAgent({ status: 'ok' });
    await settle();
    expect(wire.map((frame) => frame.event ?? frame.payload ?? 'ping')).toEqual([
      { status: 'accepted' },
      'ping',
    ]);
    dispatcher.onPong(pings[0]!);
    expect(wire.slice(2)).toEqual([
      { event: 'chat:final' },
      { type: 'res', id: '1', ok: true, payload: { status: 'ok' } },
    ]);
  });

  it('lets go of everything when the connection closes', async () => {
    const { wire, request, dispatcher, close } = setup();
    request('1', 'chat.send');
    await settle();
    close();
    dispatcher.close();
    expect(wire.at(-1)).toEqual({ event: 'agent:start' });
  });
});
