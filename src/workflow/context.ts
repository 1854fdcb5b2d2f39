import { estimateTokens } from '../model/index.js';
import type { ContextProfile } from './manifest-schemas.js';
import type { MemoryStore, MemoryStoreKind, WorkflowMemoryItem } from './memory-store.js';

export interface ContextItem {
  id: string;
  store: MemoryStoreKind;
  text: string;
  tokens: number;
  tags: string[];
  protected: boolean;
  createdAt: number;
}

export interface ContextMetadata {
  profileId: string;
  retrievalPolicy: ContextProfile['retrieval_policy'];
  budgetTokens: number;
  usedTokens: number;
  considered: number;
  included: number;
  dropped: number;
  protectedIncluded: number;
  /** True when protected items alone exceed the budget (they are kept anyway). */
  overBudget: boolean;
}

export interface AssembledContext {
  /** Oldest first, so a prompt reads in the order things happened. */
  items: ContextItem[];
  metadata: ContextMetadata;
}

function itemText(item: WorkflowMemoryItem): string {
  return typeof item.payload === 'string' ? item.payload : JSON.stringify(item.payload);
}

const wordPattern = /[\p{L}\p{N}]+/gu;
function terms(text: string): Set<string> {
  return new Set((text.toLowerCase().match(wordPattern) ?? []).filter((word) => word.length > 1));
}

/**
 * Lexical relevance in [0, 1]: the share of query terms the item contains. agentd workflows have no
 * embedding dependency, so `semantic` is this deterministic overlap score; `hybrid` averages it with recency.
 */
function relevance(queryTerms: Set<string>, text: string): number {
  if (queryTerms.size === 0) return 0;
  const itemTerms = terms(text);
  let hits = 0;
  for (const term of queryTerms) if (itemTerms.has(term)) hits++;
  return hits / queryTerms.size;
}

export interface AssembleContextOptions {
  profile: ContextProfile;
  stores: Record<MemoryStoreKind, MemoryStore>;
  taskId: string;
  /** Text the node works on; used by the semantic and hybrid policies. */
  query: string;
}

/**
 * Gathers the profile's sources (task memory of this task only; project and global stores whole), keeps
 * items with any of a source's tags (all items when it lists none), ranks them by the retrieval policy and
 * fits them to `max_tokens`: protected items first, then the best-ranked items that still fit.
 */
export async function assembleContext(options: AssembleContextOptions): Promise<AssembledContext> {
  const { profile } = options;
  const byId = new Map<string, WorkflowMemoryItem>();
  for (const source of profile.sources) {
    const items = await options.stores[source.store].list(
      source.store === 'task' ? { taskId: options.taskId } : {},
    );
    const wanted = source.tags.length > 0 ? new Set(source.tags) : undefined;
    for (const item of items) {
      if (wanted && !item.tags.some((tag) => wanted.has(tag))) continue;
      byId.set(`${item.store}:${item.id}`, item);
    }
  }
  const candidates = [...byId.values()].map((item) => {
    const text = itemText(item);
    return { item, text, tokens: estimateTokens(text) };
  });
  // Newest first: created time, then insertion order within a store, then store name for a total order.
  const storeOrder: Record<MemoryStoreKind, number> = { task: 0, project: 1, global: 2 };
  candidates.sort(
    (a, b) =>
      b.item.createdAt - a.item.createdAt ||
      b.item.seq - a.item.seq ||
      storeOrder[a.item.store] - storeOrder[b.item.store],
  );
  let ranked = candidates;
  if (profile.retrieval_policy !== 'recency') {
    const queryTerms = terms(options.query);
    const count = candidates.length;
    const scored = candidates.map((candidate, recencyRank) => {
      const lexical = relevance(queryTerms, candidate.text);
      const recency = count > 1 ? 1 - recencyRank / (count - 1) : 1;
      return {
        candidate,
        score: profile.retrieval_policy === 'semantic' ? lexical : (lexical + recency) / 2,
        recencyRank,
      };
    });
    scored.sort((a, b) => b.score - a.score || a.recencyRank - b.recencyRank);
    ranked = scored.map((entry) => entry.candidate);
  }
  const topK = typeof profile.metadata.top_k === 'number' ? profile.metadata.top_k : Number.POSITIVE_INFINITY;

  const chosen: typeof candidates = [];
  let used = 0;
  for (const candidate of ranked) {
    if (!candidate.item.protected) continue;
    chosen.push(candidate);
    used += candidate.tokens;
  }
  const protectedIncluded = chosen.length;
  let unprotected = 0;
  for (const candidate of ranked) {
    if (candidate.item.protected || unprotected >= topK) continue;
    if (used + candidate.tokens > profile.max_tokens) continue;
    chosen.push(candidate);
    used += candidate.tokens;
    unprotected++;
  }
  chosen.sort((a, b) => a.item.createdAt - b.item.createdAt || a.item.seq - b.item.seq);
  return {
    items: chosen.map(({ item, text, tokens }) => ({
      id: item.id,
      store: item.store,
      text,
      tokens,
      tags: item.tags,
      protected: item.protected,
      createdAt: item.createdAt,
    })),
    metadata: {
      profileId: profile.id,
      retrievalPolicy: profile.retrieval_policy,
      budgetTokens: profile.max_tokens,
      usedTokens: used,
      considered: candidates.length,
      included: chosen.length,
      dropped: candidates.length - chosen.length,
      protectedIncluded,
      overBudget: used > profile.max_tokens,
    },
  };
}
