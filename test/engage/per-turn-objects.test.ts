// Objects a chat turn makes must not keep the turn alive past its end. Two measured causes
// (docs/decisions/0026-no-per-call-getter-literals.md): an object literal with a getter made per call kept
// its getter's closure, and all that closure reached, through every young-generation collection until a
// full one; and a finished model call that still pointed at its provider's iterator and the callbacks on
// its promises did the same for the whole call. These tests pin down the shapes that avoid both.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { createAcceptance } from '../../src/chat/service/acceptance.js';
import { createRunState } from '../../src/engage/run-state.js';
import type { LanguageModel, ModelCallOptions, ModelStreamEvent } from '../../src/model/index.js';
import { streamModel, streamModelTo } from '../../src/model/index.js';
import { openTestDatabase } from '../helpers/databases.js';
import { createHarness, sessionRef } from '../memory/memory-fixtures.js';
import { stepOptions } from './steps/helpers.js';

/** No accessor of the object is its own; the named ones are its prototype's. */
function expectPrototypeAccessors(object: object, names: string[]): void {
  for (const [name, descriptor] of Object.entries(Object.getOwnPropertyDescriptors(object)))
    expect(descriptor.get ?? descriptor.set, name).toBeUndefined();
  for (const name of names) {
    const onPrototype = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(object), name);
    expect(onPrototype?.get, name).toBeTypeOf('function');
  }
}

/** A provider whose replies are instant, recording the options and the iterator of each call. */
function recordingModel() {
  const calls: Array<{ options: ModelCallOptions; iterator: WeakRef<object> }> = [];
  const model: LanguageModel = {
    specificationVersion: 'v1',
    provider: 'test',
    modelId: 'instant',
    contextWindowTokens: 8_000,
    doStream(_request, options) {
      const iterator = (async function* (): AsyncGenerator<ModelStreamEvent> {
        yield { type: 'text-delta', text: 'hi' };
        yield { type: 'usage', usage: { inputTokens: 1, outputTokens: 1 } };
        yield { type: 'finish', stopReason: 'end_turn' };
      })();
      calls.push({ options, iterator: new WeakRef(iterator) });
      return iterator;
    },
  };
  return { model, calls };
}

function exposeGc(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

describe('objects made per turn', () => {
  it('keep their accessors on a prototype, not in a literal made per call', async () => {
    const { options } = stepOptions([], { signal: new AbortController().signal });
    expectPrototypeAccessors(createRunState(options), ['signal']);
    expectPrototypeAccessors(createAcceptance(), []);

    const db = await openTestDatabase('sqlite');
    try {
      const { memory } = createHarness(db);
      const ref = sessionRef();
      await memory.append(ref, { role: 'user', content: 'hello' });
      const lease = await memory.pin(ref);
      expectPrototypeAccessors(lease, ['memoryIds', 'entries']);
      expect(lease.memoryIds).toEqual([1]);
      lease.release();
    } finally {
      await db.close();
    }

    const { model, calls } = recordingModel();
    await streamModelTo(model, { messages: [{ role: 'user', content: 'x' }] }, { onEvent: () => {} });
    expectPrototypeAccessors(calls[0]!.options, ['signal', 'aborted']);
    expect(calls[0]!.options.aborted).toBe(false);
    expect(calls[0]!.options.signal?.aborted).toBe(false);
  });

  it('a model call, finished or left early, lets go of its provider’s iterator', async () => {
    const gc = exposeGc();
    const { model, calls } = recordingModel();
    const request = { messages: [{ role: 'user' as const, content: 'x' }] };
    const finished = streamModel(model, request);
    const events: string[] = [];
    for await (const event of finished) events.push(event.type);
    expect(events).toEqual(['text-delta', 'usage', 'finish']);
    const leftEarly = streamModel(model, request);
    for await (const event of leftEarly) {
      expect(event.type).toBe('text-delta');
      break;
    }
    // Microtasks that still referred to the iterators have run by the next macrotask.
    await new Promise((resolve) => setImmediate(resolve));
    gc();
    // The calls are still referenced here; their providers' iterators are not.
    expect(calls.map((call) => call.iterator.deref())).toEqual([undefined, undefined]);
    expect(await finished.next()).toEqual({ value: undefined, done: true });
    expect(await leftEarly.next()).toEqual({ value: undefined, done: true });
  });
});
