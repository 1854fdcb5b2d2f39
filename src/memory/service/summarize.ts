import type { Summarizer } from '../summarizer.js';
import type { SessionRef } from '../types.js';
import type { MemoryContext } from './context.js';
import { queueEmbedding } from './embedding-indexer.js';
import {
  activeOf,
  enforceLimits,
  entryTokens,
  eventRow,
  idRange,
  isPinned,
  pickOldest,
  publicCopy,
  publishEvent,
  replaceInRam,
  tokensOf,
  tombstoneFor,
  withSession,
} from './ram.js';
import type { SummarizeOptions, SummarizeResult } from './types.js';
import { commit } from './write-retry.js';

/**
 * Folds the oldest replaceable entries into one summary. Three phases: pick and mark the entries busy
 * (under the session lock), call the model (outside it, so appends go on), then commit the summary and
 * tombstones (under the lock again, unless the session went away or an entry got pinned meanwhile).
 */
export async function summarize(
  ctx: MemoryContext,
  ref: SessionRef,
  summarizeOptions: SummarizeOptions = {},
): Promise<SummarizeResult> {
  const { config } = ctx;
  const maxEntries = Math.max(1, Math.floor(summarizeOptions.maxEntries ?? config.summarizeBatch));
  const keepLatest = Math.max(0, Math.floor(summarizeOptions.keepLatest ?? 1));
  const reason = summarizeOptions.reason ?? 'requested';
  const picked = await withSession(ctx, ref, async (ram) => {
    // A summary of a single entry saves nothing, unless that entry is itself large.
    const candidates = pickOldest(ram, (takenCount) => takenCount < maxEntries, keepLatest);
    if (candidates.length === 0) return undefined;
    for (const entry of candidates) ram.busy.add(entry.memoryId);
    return { ram, candidates };
  });
  if (!picked)
    return { summary: undefined, summarizedIds: [], method: undefined, skipped: 'nothing-to-summarize' };
  const { ram, candidates } = picked;
  const ids = candidates.map((entry) => entry.memoryId);
  const releaseBusy = () => {
    for (const id of ids) ram.busy.delete(id);
  };
  let result: Awaited<ReturnType<Summarizer['summarize']>>;
  try {
    result = await ctx.summarizer.summarize(candidates.map(publicCopy), { signal: summarizeOptions.signal });
  } catch (error) {
    releaseBusy();
    throw error;
  }
  return ctx.mutex.run(ram.ref.sessionId, async () => {
    try {
      if (ctx.sessions.get(ram.ref.sessionId) !== ram) {
        return {
          summary: undefined,
          summarizedIds: [],
          method: undefined,
          skipped: 'session-gone' as const,
        };
      }
      if (candidates.some((entry) => isPinned(ram, entry))) {
        return { summary: undefined, summarizedIds: [], method: undefined, skipped: 'pinned' as const };
      }
      const nowMs = ctx.clock.now();
      const before = tokensOf(activeOf(ram));
      const summaryTokens = entryTokens({ content: result.text });
      const detail = {
        kind: 'summarized' as const,
        count: candidates.length,
        tokensBefore: before,
        tokensAfter: before - tokensOf(candidates) + summaryTokens,
        memoryIds: ids,
        message:
          `summarized ${candidates.length} entries (${idRange(ids)}) ` +
          (result.method === 'model'
            ? 'with the model'
            : `extractively (${result.fallbackReason ?? 'fallback'})`),
        reason,
      };
      const written = await commit(
        ctx,
        ram,
        candidates.length + 1,
        (first) => [
          {
            // Spelled out, not spread: see buildEntry in ram.ts.
            memoryId: first,
            address: `${ram.ref.sessionKey}#${first}`,
            sessionId: ram.ref.sessionId,
            sessionKey: ram.ref.sessionKey,
            agentId: ram.ref.agentId,
            kind: 'summary',
            role: 'system',
            state: 'active',
            content: result.text,
            relatedTo: null,
            sourceIds: ids,
            tokens: summaryTokens,
            createdAtMs: nowMs,
            archivedAtMs: null,
            metadata: { sourceIds: ids, method: result.method, reason },
            orderKey: candidates[0]!.orderKey,
            rowId: undefined,
          },
          ...candidates.map((candidate, index) =>
            tombstoneFor(
              ram,
              first + 1 + index,
              candidate,
              `[summarized:${candidate.memoryId}] → #${first}`,
              { summaryId: first },
              nowMs,
            ),
          ),
        ],
        undefined,
        {
          requireCommit: summarizeOptions.requireCommit ?? false,
          retire: { memoryIds: ids, state: 'summarized', nowMs, event: eventRow(ctx, ram, detail, nowMs) },
        },
      );
      replaceInRam(ctx, ram, ids, written);
      queueEmbedding(ctx, written[0]!);
      publishEvent(ctx, ram, detail);
      releaseBusy();
      await enforceLimits(ctx, ram);
      return { summary: publicCopy(written[0]!), summarizedIds: ids, method: result.method };
    } finally {
      releaseBusy();
    }
  });
}
