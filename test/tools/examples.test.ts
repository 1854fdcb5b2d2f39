import { describe, expect, it } from 'vitest';
import type { AgentRuntime } from '../../src/agents/index.js';
import { createSendMessageTool } from '../../src/agents/index.js';
import { createBus } from '../../src/bus/index.js';
import type { Ledger } from '../../src/ledger/index.js';
import { createExecuteCodeTool, type SandboxPool, sandboxConfigSchema } from '../../src/sandbox/index.js';
import { createSkillTools, type SkillLibrary } from '../../src/skills/index.js';
import type { MemoryToolBackend } from '../../src/tools/builtin/memory.js';
import { createBuiltinTools, createToolRegistry, type ToolDefinition } from '../../src/tools/index.js';
import { createChildWorkTools, createReportBlockedTool, type WorkQueue } from '../../src/work/index.js';

/** Every tool the runtime can give a model, with all the optional ones switched on. Nothing here runs. */
function everyBuiltinTool(): ToolDefinition[] {
  const unused = {} as never;
  return [
    ...createBuiltinTools({
      ledger: unused as Ledger,
      memory: unused as MemoryToolBackend,
      bash: { enabled: true },
      httpFetch: { enabled: true, allowedHosts: ['example.com'] },
    }),
    ...createSkillTools({ library: unused as SkillLibrary }),
    ...createChildWorkTools({ queue: unused as WorkQueue, bus: createBus() }),
    createReportBlockedTool({ queue: unused as WorkQueue, ledger: unused as Ledger }),
    createSendMessageTool(unused as AgentRuntime),
    createExecuteCodeTool({
      pool: unused as SandboxPool,
      config: sandboxConfigSchema.parse({ languages: ['javascript', 'python'] }),
    }),
  ];
}

/** `Example: {json}` lines, which defineTool writes from a tool's `examples`. */
function jsonExamples(description: string): unknown[] {
  return [...description.matchAll(/^Example: (.+)$/gm)].map((match) => JSON.parse(match[1]!));
}

/** Calls written in prose, as execute_code shows them: `tools.name({key: "value"})` or `tools.name(key="value")`. */
function proseCalls(text: string): Array<{ tool: string; args: Record<string, unknown> }> {
  const description = text.replace(/^Example: .*$/gm, '');
  const calls: Array<{ tool: string; args: Record<string, unknown> }> = [];
  for (const match of description.matchAll(/tools\.(\w+)\(\{([^}]*)\}\)/g)) {
    const json = `{${match[2]!.replace(/(\w+):/g, '"$1":')}}`;
    calls.push({ tool: match[1]!, args: JSON.parse(json) });
  }
  for (const match of description.matchAll(/tools\.(\w+)\((\w+=[^)]*)\)/g)) {
    const args: Record<string, unknown> = {};
    for (const pair of match[2]!.matchAll(/(\w+)=("[^"]*"|[\w.]+)/g))
      args[pair[1]!] = JSON.parse(pair[2]!.startsWith('"') ? pair[2]! : JSON.stringify(pair[2]));
    calls.push({ tool: match[1]!, args });
  }
  return calls;
}

describe('built-in tool descriptions', () => {
  const tools = everyBuiltinTool();
  const byName = new Map(tools.map((tool) => [tool.name, tool]));

  it('has every tool name once', () => {
    expect(byName.size).toBe(tools.length);
    expect(tools.length).toBeGreaterThanOrEqual(20);
  });

  it.each(tools.map((tool) => [tool.name, tool] as const))('%s: every example fits the schema', (_, tool) => {
    const examples = jsonExamples(tool.description);
    expect(examples.length, `${tool.name} shows no example`).toBeGreaterThan(0);
    for (const example of examples) {
      const parsed = tool.input.safeParse(example);
      expect(
        parsed.success,
        `${tool.name} example ${JSON.stringify(example)}: ${parsed.error?.message}`,
      ).toBe(true);
    }
  });

  it('calls written in prose name real tools with arguments their schemas accept', () => {
    const calls = tools.flatMap((tool) => proseCalls(tool.description));
    expect(calls.length).toBeGreaterThanOrEqual(2);
    for (const call of calls) {
      const target = byName.get(call.tool);
      expect(target, `a description calls unknown tool ${call.tool}`).toBeDefined();
      const parsed = target!.input.safeParse(call.args);
      expect(parsed.success, `${call.tool}(${JSON.stringify(call.args)}): ${parsed.error?.message}`).toBe(
        true,
      );
    }
  });

  it('a field whose description promises a default is optional in the JSON Schema the model gets', () => {
    const modelTools = createToolRegistry(tools).toModelTools();
    let checked = 0;
    for (const tool of modelTools) {
      const schema = tool.inputSchema as {
        properties?: Record<string, { description?: string }>;
        required?: string[];
      };
      for (const [field, property] of Object.entries(schema.properties ?? {})) {
        if (!/\bdefaults? to\b|\bdefault\b/i.test(property.description ?? '')) continue;
        checked++;
        expect(schema.required ?? [], `${tool.name}.${field} says it has a default`).not.toContain(field);
      }
    }
    expect(checked).toBeGreaterThanOrEqual(3);
  });

  it('spawn_child_work accepts a description alone, as its field descriptions promise', () => {
    const spawn = byName.get('spawn_child_work')!;
    expect(spawn.input.safeParse({ description: 'Check the logs' }).success).toBe(true);
    expect(spawn.input.safeParse({}).success).toBe(false);
  });
});
