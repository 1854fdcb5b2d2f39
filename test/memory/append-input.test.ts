import { afterEach, describe, expect, it, vi } from 'vitest';
import { appendInputSchema, parseAppendInput } from '../../src/memory/service/context.js';
import { ErrorCodes } from '../../src/util/index.js';

const withHiddenKey = () => {
  const metadata: Record<string, unknown> = { runId: 'r1' };
  Object.defineProperty(metadata, 'hidden', { value: 1, enumerable: false });
  return metadata;
};

/** Inputs on both sides of every check the direct path makes, and a few it leaves to the schema. */
const inputs: unknown[] = [
  { role: 'user', content: 'hello', metadata: { runId: 'r1' } },
  { role: 'system', content: '' },
  { role: 'assistant', content: 'hi', toolCalls: undefined, metadata: { runId: 'r1', aborted: true } },
  { role: 'assistant', content: 'hi', toolCalls: [{ id: 't1', name: 'clock', arguments: {} }] },
  { role: 'assistant', content: 'hi', toolCalls: [] },
  { role: 'assistant', content: 'hi', toolCalls: 'no' },
  { role: 'user', content: 'x', extra: 1, toolCalls: [{ id: 't1', name: 'clock', arguments: {} }] },
  { role: 'user', content: 'x', metadata: undefined, createdAtMs: undefined },
  { role: 'user', content: 'x', createdAtMs: 0 },
  { role: 'user', content: 'x', createdAtMs: 1_700_000_000_000 },
  { role: 'user', content: 'x', createdAtMs: -1 },
  { role: 'user', content: 'x', createdAtMs: 1.5 },
  { role: 'user', content: 'x', createdAtMs: 2 ** 53 },
  { role: 'user', content: 'x', createdAtMs: '5' },
  { role: 'user', content: 'x', createdAtMs: Number.NaN },
  { role: 'user', content: 'x'.repeat(1_000_000) },
  { role: 'user', content: 'x'.repeat(1_000_001) },
  { role: 'user', content: 42 },
  { role: 'user' },
  { role: 'tool', content: 'out', toolCallId: 't1', toolName: 'clock' },
  { role: 'tool', content: 'out' },
  { role: 'admin', content: 'x' },
  { content: 'x' },
  { role: 'user', content: 'x', metadata: null },
  { role: 'user', content: 'x', metadata: [] },
  { role: 'user', content: 'x', metadata: 'text' },
  { role: 'user', content: 'x', metadata: new Map([['a', 1]]) },
  { role: 'user', content: 'x', metadata: Object.create(null) },
  { role: 'user', content: 'x', metadata: { nested: { deep: [1, 2] }, n: null } },
  { role: 'user', content: 'x', metadata: { a: 1, [Symbol('s')]: 2 } },
  { role: 'user', content: 'x', metadata: JSON.parse('{"__proto__": {"polluted": true}, "b": 2}') },
  { role: 'user', content: 'x', metadata: withHiddenKey() },
  null,
  'user',
  [],
  Object.assign(['x'], { role: 'user', content: 'an array that looks like a message' }),
];

describe('append input check', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('returns what the schema returns for every input it accepts, and fails where the schema does', () => {
    for (const [index, input] of inputs.entries()) {
      const expected = appendInputSchema.safeParse(input);
      if (expected.success) {
        expect(parseAppendInput(input, index), `input ${index}`).toStrictEqual(expected.data);
      } else {
        expect(() => parseAppendInput(input, index), `input ${index}`).toThrow(
          expect.objectContaining({ code: ErrorCodes.invalidRequest }),
        );
      }
    }
  });

  it("checks a chat turn's messages without the schema, and anything with tool calls through it", () => {
    const schema = vi.spyOn(appendInputSchema, 'safeParse');
    parseAppendInput({ role: 'user', content: 'hello', metadata: { runId: 'r1' } }, 0);
    parseAppendInput(
      { role: 'assistant', content: 'hi', toolCalls: undefined, metadata: { runId: 'r1' } },
      1,
    );
    expect(schema).not.toHaveBeenCalled();
    parseAppendInput(
      { role: 'assistant', content: '', toolCalls: [{ id: 't1', name: 'n', arguments: {} }] },
      2,
    );
    parseAppendInput({ role: 'user', content: 'x', metadata: Object.create(null) }, 3);
    expect(schema).toHaveBeenCalledTimes(2);
  });

  it("keeps a copy of the caller's metadata, not the object the caller may change later", () => {
    const metadata: Record<string, unknown> = { runId: 'r1' };
    const parsed = parseAppendInput({ role: 'user', content: 'x', metadata }, 0);
    metadata.runId = 'changed';
    metadata.added = true;
    expect(parsed.metadata).toEqual({ runId: 'r1' });
  });

  it('leaves no prototype polluted by a metadata key named __proto__', () => {
    const parsed = parseAppendInput(
      { role: 'user', content: 'x', metadata: JSON.parse('{"__proto__": {"polluted": true}}') },
      0,
    );
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect((parsed.metadata as Record<string, unknown>).polluted).toBeUndefined();
  });
});
