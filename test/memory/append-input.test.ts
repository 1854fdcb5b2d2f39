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
  { role: 'tool', content: 'out', toolCallId: 't1', toolName: 'clock', isError: true, metadata: { a: 1 } },
  { role: 'tool', content: 'out', toolCallId: 't1', toolName: 'clock', isError: false, createdAtMs: 5 },
  { role: 'tool', content: 'out', toolCallId: 't1', toolName: 'clock', isError: undefined },
  { role: 'tool', content: 'out', toolCallId: 't1', toolName: 'clock', isError: 'yes' },
  { role: 'tool', content: 'out', toolCallId: 't1', toolName: 'clock', isError: 0 },
  { role: 'tool', content: 'out', toolCallId: '', toolName: 'clock' },
  { role: 'tool', content: 'out', toolCallId: 't1', toolName: '' },
  { role: 'tool', content: 'out', toolCallId: 'i'.repeat(512), toolName: 'n'.repeat(256) },
  { role: 'tool', content: 'out', toolCallId: 'i'.repeat(513), toolName: 'clock' },
  { role: 'tool', content: 'out', toolCallId: 't1', toolName: 'n'.repeat(257) },
  { role: 'tool', content: 'out', toolCallId: 7, toolName: 'clock' },
  { role: 'tool', content: 'out', toolCallId: 't1', toolName: 'clock', toolCalls: [], extra: 1 },
  { role: 'tool', content: 'out', toolCallId: 't1', toolName: 'clock', metadata: Object.create(null) },
  { role: 'tool', content: null, toolCallId: 't1', toolName: 'clock' },
  {
    role: 'assistant',
    content: '',
    toolCalls: [{ id: 't1', name: 'n', arguments: { a: [1], b: { c: null } } }],
  },
  { role: 'assistant', content: '', toolCalls: [{ id: 't1', name: 'n', arguments: {}, extra: true }] },
  { role: 'assistant', content: '', toolCalls: [{ id: '', name: 'n', arguments: {} }] },
  { role: 'assistant', content: '', toolCalls: [{ id: 't1', name: 'n'.repeat(257), arguments: {} }] },
  { role: 'assistant', content: '', toolCalls: [{ id: 'i'.repeat(513), name: 'n', arguments: {} }] },
  { role: 'assistant', content: '', toolCalls: [{ id: 't1', name: 'n' }] },
  { role: 'assistant', content: '', toolCalls: [{ id: 't1', name: 'n', arguments: [] }] },
  { role: 'assistant', content: '', toolCalls: [{ id: 't1', name: 'n', arguments: 'x' }] },
  { role: 'assistant', content: '', toolCalls: [{ id: 't1', name: 'n', arguments: null }] },
  { role: 'assistant', content: '', toolCalls: [{ id: 't1', name: 'n', arguments: Object.create(null) }] },
  { role: 'assistant', content: '', toolCalls: [{ id: 't1', name: 'n', arguments: { [Symbol('s')]: 1 } }] },
  {
    role: 'assistant',
    content: '',
    toolCalls: [{ id: 't1', name: 'n', arguments: JSON.parse('{"__proto__": {"polluted": true}}') }],
  },
  { role: 'assistant', content: '', toolCalls: [null] },
  { role: 'assistant', content: '', toolCalls: [[]] },
  // biome-ignore lint/suspicious/noSparseArray: a hole is an element the schema must see as undefined
  { role: 'assistant', content: '', toolCalls: [, { id: 't1', name: 'n', arguments: {} }] },
  {
    role: 'assistant',
    content: '',
    toolCalls: Array.from({ length: 256 }, (_, index) => ({ id: `t${index}`, name: 'n', arguments: {} })),
  },
  {
    role: 'assistant',
    content: '',
    toolCalls: Array.from({ length: 257 }, (_, index) => ({ id: `t${index}`, name: 'n', arguments: {} })),
  },
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

  it("checks a chat turn's messages and a loop's tool calls and results without the schema, the rest through it", () => {
    const schema = vi.spyOn(appendInputSchema, 'safeParse');
    parseAppendInput({ role: 'user', content: 'hello', metadata: { runId: 'r1' } }, 0);
    parseAppendInput(
      { role: 'assistant', content: 'hi', toolCalls: undefined, metadata: { runId: 'r1' } },
      1,
    );
    parseAppendInput(
      { role: 'assistant', content: '', toolCalls: [{ id: 't1', name: 'n', arguments: { q: 'x' } }] },
      2,
    );
    parseAppendInput({ role: 'tool', content: 'ok', toolCallId: 't1', toolName: 'n', isError: false }, 3);
    expect(schema).not.toHaveBeenCalled();
    parseAppendInput({ role: 'user', content: 'x', metadata: Object.create(null) }, 4);
    parseAppendInput(
      {
        role: 'assistant',
        content: '',
        toolCalls: [{ id: 't1', name: 'n', arguments: Object.create(null) }],
      },
      5,
    );
    expect(() => parseAppendInput({ role: 'tool', content: 'ok', toolCallId: '', toolName: 'n' }, 6)).toThrow(
      expect.objectContaining({ code: ErrorCodes.invalidRequest }),
    );
    expect(schema).toHaveBeenCalledTimes(3);
  });

  it("keeps a copy of a tool call's arguments, not the object the caller may change later", () => {
    const args: Record<string, unknown> = { q: 'x' };
    const calls = [{ id: 't1', name: 'n', arguments: args }];
    const parsed = parseAppendInput({ role: 'assistant', content: '', toolCalls: calls }, 0);
    args.q = 'changed';
    calls.push({ id: 't2', name: 'n', arguments: {} });
    expect(parsed).toStrictEqual({
      role: 'assistant',
      content: '',
      toolCalls: [{ id: 't1', name: 'n', arguments: { q: 'x' } }],
    });
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
