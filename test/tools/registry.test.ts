import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createToolRegistry, defineTool } from '../../src/tools/index.js';
import { AgentdError } from '../../src/util/index.js';

const echo = defineTool({
  name: 'echo',
  description: 'Echo text back',
  input: z.object({ text: z.string().describe('what to say'), times: z.number().int().min(1).default(1) }),
  execute: async (args) => args.text.repeat(args.times),
});

const other = defineTool({ name: 'other', description: 'o', input: z.object({}), execute: async () => 'o' });

describe('tool registry', () => {
  it('rejects tool names providers would refuse', () => {
    expect(() =>
      defineTool({ name: 'bad name', description: '', input: z.object({}), execute: async () => '' }),
    ).toThrow(/must match/);
    expect(() =>
      defineTool({ name: 'x'.repeat(65), description: '', input: z.object({}), execute: async () => '' }),
    ).toThrow();
  });

  it('exports zod schemas as JSON Schema, input view (defaults optional), without $schema', () => {
    const registry = createToolRegistry([echo]);
    const [definition] = registry.toModelTools();
    expect(definition).toEqual({
      name: 'echo',
      description: 'Echo text back',
      inputSchema: {
        type: 'object',
        properties: {
          text: { type: 'string', description: 'what to say' },
          times: expect.objectContaining({ type: 'integer', minimum: 1, default: 1 }),
        },
        required: ['text'],
      },
    });
  });

  it('filters by allowed names, keeps registration order, refuses duplicates', () => {
    const registry = createToolRegistry([echo, other]);
    expect(registry.toModelTools(['other', 'missing']).map((tool) => tool.name)).toEqual(['other']);
    expect(registry.list().map((tool) => tool.name)).toEqual(['echo', 'other']);
    try {
      registry.register(echo);
      expect.unreachable();
    } catch (error) {
      expect(AgentdError.isInstance(error) && error.code).toBe('CONFLICT');
    }
  });

  it('unregisters a tool and serves a given JSON Schema verbatim', () => {
    const external = {
      name: 'mcp__calc__add',
      description: 'adds',
      input: z.record(z.string(), z.unknown()),
      inputJsonSchema: { type: 'object', properties: { a: { type: 'number' } }, required: ['a'] },
      execute: async () => 'x',
    };
    const registry = createToolRegistry([echo, external]);
    expect(registry.toModelTools(['mcp__calc__add'])[0]!.inputSchema).toEqual(external.inputJsonSchema);
    expect(registry.unregister('mcp__calc__add')).toBe(true);
    expect(registry.unregister('mcp__calc__add')).toBe(false);
    expect(registry.has('mcp__calc__add')).toBe(false);
    expect(registry.toModelTools().map((tool) => tool.name)).toEqual(['echo']);
  });

  it('hands out definitions frozen to the last level, apart from the schema it was given', () => {
    const external = {
      name: 'mcp__calc__add',
      description: 'adds',
      input: z.record(z.string(), z.unknown()),
      inputJsonSchema: { type: 'object', properties: { a: { type: 'number' } } } as Record<string, any>,
      execute: async () => 'x',
    };
    const [definition] = createToolRegistry([external]).toModelTools();
    // Providers keep the JSON of frozen definitions, so a change to the caller's schema must not reach it.
    external.inputJsonSchema.properties.a.type = 'string';
    expect(definition!.inputSchema).toEqual({ type: 'object', properties: { a: { type: 'number' } } });
    expect(Object.isFrozen(definition)).toBe(true);
    const properties = definition!.inputSchema.properties as Record<string, Record<string, unknown>>;
    expect(Object.isFrozen(properties.a)).toBe(true);
    expect(() => {
      properties.a!.type = 'string';
    }).toThrow(TypeError);
  });

  it('hands out one list of every tool and one set of names until a tool is registered or removed', () => {
    const registry = createToolRegistry([echo]);
    const tools = registry.toModelTools();
    const names = registry.names();
    expect(registry.toModelTools()).toBe(tools);
    expect(registry.names()).toBe(names);
    expect(Object.isFrozen(tools)).toBe(true);
    registry.register(other);
    expect(registry.toModelTools().map((tool) => tool.name)).toEqual(['echo', 'other']);
    expect([...registry.names()]).toEqual(['echo', 'other']);
    expect(tools.map((tool) => tool.name)).toEqual(['echo']);
    registry.unregister('echo');
    expect(registry.toModelTools().map((tool) => tool.name)).toEqual(['other']);
    expect([...registry.names()]).toEqual(['other']);
  });
});
