import type { SqlExecutor } from '../../store/index.js';
import { type Effect, type QueueContext, wake } from './context.js';

/** NOTIFY inside the transaction: Postgres delivers it at commit, and never for a rolled-back change. */
export async function notify(
  ctx: QueueContext,
  tx: SqlExecutor,
  message: { t: 'wake' } | { t: 'terminal'; id: string },
): Promise<void> {
  if (!ctx.isPostgres) return;
  await tx.run('SELECT pg_notify(?, ?)', [ctx.channel, JSON.stringify({ o: ctx.instanceId, ...message })]);
}

/**
 * Every move back to `queued` must reach idle workers: other processes through NOTIFY at commit, this
 * one through `wake()` after commit, right after the event that announces the move.
 */
export async function wakeWorkersAfterCommit(
  ctx: QueueContext,
  tx: SqlExecutor,
  effects: Effect[],
  announce: () => void,
): Promise<void> {
  await notify(ctx, tx, { t: 'wake' });
  effects.push(() => {
    announce();
    wake(ctx.state);
  });
}

/** Runs `work` in a transaction and fires the collected bus events only after it committed. */
export async function withEffects<T>(
  ctx: QueueContext,
  work: (tx: SqlExecutor, effects: Effect[]) => Promise<T>,
): Promise<T> {
  const effects: Effect[] = [];
  const result = await ctx.db.transaction((tx) => work(tx, effects));
  for (const effect of effects) effect();
  return result;
}
