import { z } from 'zod';
import { defineTool, type ToolDefinition } from '../tool.js';

/**
 * What the memory tools need from the memory subsystem. Implemented by src/memory; wired by the runtime.
 * Defined here (L2 tools) so tools do not depend on memory's internals.
 */
export interface MemoryToolBackend {
  search(query: {
    agentId: string;
    query: string;
    limit: number;
  }): Promise<Array<{ id: string; content: string; score: number; sessionKey?: string; createdAt: number }>>;
  get(id: string): Promise<{ id: string; content: string; role: string; createdAt: number } | undefined>;
}

/** `memory_search {query, limit?}` and `memory_get {id}` over the agent's long-term memory. */
export function createMemoryTools(memory: MemoryToolBackend): ToolDefinition[] {
  const search = defineTool({
    name: 'memory_search',
    description:
      "Search this agent's long-term memory. Returns the best matches with their ids; use memory_get for full text.",
    examples: [{ query: 'deployment checklist', limit: 5 }],
    input: z.object({ query: z.string().min(1), limit: z.number().int().min(1).max(50).default(5) }),
    async execute(args, context) {
      const hits = await memory.search({ agentId: context.agentId, query: args.query, limit: args.limit });
      if (hits.length === 0) return 'No memories matched.';
      return hits
        .map((hit) => {
          const preview = hit.content.length > 300 ? `${hit.content.slice(0, 300)}…` : hit.content;
          return `[${hit.id}] (score ${hit.score.toFixed(3)}, ${new Date(hit.createdAt).toISOString()}) ${preview}`;
        })
        .join('\n');
    },
  });
  const get = defineTool({
    name: 'memory_get',
    description: 'Fetch one memory entry in full by its id (as returned by memory_search).',
    examples: [{ id: 'mem_01' }],
    input: z.object({ id: z.string().min(1) }),
    async execute(args) {
      const entry = await memory.get(args.id);
      if (!entry) return { content: `No memory with id ${args.id}.`, isError: true };
      return `[${entry.id}] ${entry.role} at ${new Date(entry.createdAt).toISOString()}:\n${entry.content}`;
    },
  });
  return [search, get];
}
