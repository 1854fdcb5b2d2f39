import type { MemoryService } from './service.js';

/** What the engage loop's `memory_search` / `memory_get` tools use. Ids are global `<sessionKey>#<n>`. */
export interface MemoryAccess {
  search(options: {
    agentId: string;
    query: string;
    limit: number;
  }): Promise<Array<{ id: string; content: string; score: number; sessionKey?: string; createdAt: number }>>;
  get(id: string): Promise<{ id: string; content: string; role: string; createdAt: number } | undefined>;
}

export function createMemoryAccess(memory: MemoryService): MemoryAccess {
  return {
    async search({ agentId, query, limit }) {
      const hits = await memory.search({ agentId, query, limit });
      return hits.map((hit) => ({
        id: hit.address,
        content: hit.content,
        score: hit.score,
        sessionKey: hit.sessionKey,
        createdAt: hit.createdAtMs,
      }));
    },
    async get(id) {
      const entry = await memory.get(id);
      if (!entry || entry.state === 'tombstone') return undefined;
      return {
        id: entry.address,
        content: entry.content,
        role: entry.kind === 'summary' ? 'summary' : entry.role,
        createdAt: entry.createdAtMs,
      };
    },
  };
}
