import type { ArchiveResult, SnapshotResult } from '../types.js';
import type { MemoryContext, RamSession } from './context.js';
import { activeOf, ensureLoaded, eventRow, publishEvent, tokensOf } from './ram.js';
import type { ArchiveOptions } from './types.js';
import { commit } from './write-retry.js';

/** Records what the session's context holds now (ids, counts, tokens), in the session's write order. */
export async function takeSnapshot(
  ctx: MemoryContext,
  ram: RamSession,
  reason: string,
  requireCommit = false,
): Promise<SnapshotResult> {
  const active = activeOf(ram);
  const nowMs = ctx.clock.now();
  const snapshot = {
    id: ctx.newId('msnap'),
    sessionId: ram.ref.sessionId,
    sessionKey: ram.ref.sessionKey,
    agentId: ram.ref.agentId,
    reason,
    nextId: ram.nextId,
    entryCount: active.filter((entry) => entry.kind === 'entry').length,
    summaryCount: active.filter((entry) => entry.kind === 'summary').length,
    tombstoneCount: ram.entries.length - active.length,
    activeTokens: tokensOf(active),
    activeIds: active.map((entry) => entry.memoryId),
    createdAtMs: nowMs,
  };
  const detail = {
    kind: 'snapshot' as const,
    count: active.length,
    tokensBefore: snapshot.activeTokens,
    tokensAfter: snapshot.activeTokens,
    memoryIds: snapshot.activeIds,
    message: `snapshot of ${active.length} active entries (${reason})`,
    reason,
  };
  await commit(
    ctx,
    ram,
    0,
    () => [],
    async (tx) => {
      await ctx.ltm.insertSnapshot(tx, snapshot);
      await ctx.ltm.insertEvent(tx, eventRow(ctx, ram, detail, nowMs));
    },
    { requireCommit },
  );
  publishEvent(ctx, ram, detail);
  return {
    snapshotId: snapshot.id,
    entryCount: snapshot.entryCount,
    summaryCount: snapshot.summaryCount,
    tombstoneCount: snapshot.tombstoneCount,
    activeTokens: snapshot.activeTokens,
  };
}

/** Ends a session instance: snapshot, mark its memory archived (still recallable), drop its RAM. */
export function archive(
  ctx: MemoryContext,
  sessionId: string,
  reason: string,
  options: ArchiveOptions = {},
): Promise<ArchiveResult> {
  const { requireCommit = false, also } = options;
  const { sessions, ltm } = ctx;
  return ctx.mutex.run(sessionId, async () => {
    let ref = sessions.get(sessionId)?.ref;
    if (!ref) {
      const row = await ltm.getSession(sessionId);
      if (row?.archivedAtMs != null) {
        return {
          sessionId,
          sessionKey: row.ref.sessionKey,
          archived: false,
          snapshotId: null,
          entryCount: 0,
        };
      }
      ref = row?.ref;
    }
    if (!ref) return { sessionId, sessionKey: null, archived: false, snapshotId: null, entryCount: 0 };
    const ram = await ensureLoaded(ctx, ref);
    const snapshot = await takeSnapshot(ctx, ram, reason, requireCommit);
    const nowMs = ctx.clock.now();
    const active = activeOf(ram);
    const detail = {
      kind: 'archived' as const,
      count: active.length,
      tokensBefore: tokensOf(active),
      tokensAfter: 0,
      memoryIds: active.map((entry) => entry.memoryId),
      message: `archived session ${sessionId} (${reason})`,
      reason,
    };
    let entryCount = ram.entries.length;
    await commit(
      ctx,
      ram,
      0,
      () => [],
      async (tx) => {
        entryCount = await ltm.archiveSession(tx, ram.ref, reason, nowMs);
        await ltm.insertEvent(tx, eventRow(ctx, ram, detail, nowMs));
        await also?.(tx);
      },
      { requireCommit },
    );
    sessions.delete(sessionId);
    publishEvent(ctx, ram, detail);
    return {
      sessionId,
      sessionKey: ref.sessionKey,
      archived: true,
      snapshotId: snapshot.snapshotId,
      entryCount,
    };
  });
}
