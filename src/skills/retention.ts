import type { SqlDatabase } from '../store/index.js';
import {
  type Clock,
  createPeriodicPrune,
  type PeriodicPrune,
  type RetentionScheduleOptions,
  silentLogger,
  systemClock,
  yieldToIo,
} from '../util/index.js';

export interface SkillActivationRetentionOptions extends RetentionScheduleOptions {
  db: SqlDatabase;
  /** Activations older than this are deleted, except each skill's newest; 0 keeps them all. */
  retainMs: number;
  /**
   * Rows one DELETE removes (default 1,000; a few more when others share the batch's last millisecond): each
   * is a transaction of its own, so the write lock is held for one batch at a time, and on SQLite the event
   * loop too.
   */
  batchRows?: number;
  clock?: Clock;
}

/** Prunes now, then hourly (`start`); `prune` resolves with how many activations went; `stop` ends it. */
export type SkillActivationRetention = PeriodicPrune<number>;

/**
 * Keeps `skill_activations` from growing without bound: every run whose message names a skill's trigger
 * keyword, and every `activate_skill`, adds a row, and nothing else ever deletes one. Activations are kept
 * by age, as the audit log's events are, but each skill keeps its newest activation however old: that row is
 * what `staleSkills` reads (a skill's last activation), so its answer is the same before and after a prune.
 * A prune the database refuses (a full disk can refuse a DELETE too, a lost connection) is logged and tried
 * again at the next one; activations go on being recorded meanwhile.
 */
export function createSkillActivationRetention(
  options: SkillActivationRetentionOptions,
): SkillActivationRetention {
  const { db } = options;
  const clock = options.clock ?? systemClock;
  const batchRows = options.batchRows ?? 1_000;

  /** Deletes the skill's activations before `before`, oldest first, about `batchRows` a statement. */
  const pruneSkill = async (skillName: string, before: number, stopping: () => boolean): Promise<number> => {
    let deleted = 0;
    for (;;) {
      // A batch is the index range up to its `batchRows`-th row (and that row's instant), deleted by range:
      // Postgres may plan a DELETE … WHERE id IN (SELECT … LIMIT) as a hash join over the whole table.
      const batchEnd = await db.get<{ activated_at: number }>(
        'SELECT activated_at FROM skill_activations WHERE skill_name = ? AND activated_at < ? ORDER BY activated_at LIMIT 1 OFFSET ?',
        [skillName, before, batchRows - 1],
      );
      const { changes } = await db.run(
        'DELETE FROM skill_activations WHERE skill_name = ? AND activated_at < ?',
        [skillName, batchEnd ? Number(batchEnd.activated_at) + 1 : before],
      );
      deleted += changes;
      if (!batchEnd || stopping()) return deleted;
      // Chat turns and the activations they record go between two batches.
      await yieldToIo();
    }
  };

  /**
   * Walks the skills in the order of the (skill_name, activated_at) index: one seek gives the next skill and
   * its oldest activation, so a skill with nothing older than the cutoff costs that seek alone.
   */
  const pruneInBatches = async (stopping: () => boolean): Promise<number> => {
    if (options.retainMs <= 0) return 0;
    const cutoff = clock.now() - options.retainMs;
    let deleted = 0;
    // Every skill's name is longer than ''.
    let after = '';
    while (!stopping()) {
      const oldest = await db.get<{ skill_name: string; activated_at: number }>(
        'SELECT skill_name, activated_at FROM skill_activations WHERE skill_name > ? ORDER BY skill_name, activated_at LIMIT 1',
        [after],
      );
      if (!oldest) break;
      after = oldest.skill_name;
      if (Number(oldest.activated_at) >= cutoff) continue;
      const newest = await db.get<{ activated_at: number }>(
        'SELECT activated_at FROM skill_activations WHERE skill_name = ? ORDER BY activated_at DESC LIMIT 1',
        [after],
      );
      // A skill last activated before the cutoff keeps its last activation (and any of the same instant).
      const before = Math.min(cutoff, Number(newest?.activated_at ?? cutoff));
      if (Number(oldest.activated_at) < before) deleted += await pruneSkill(after, before, stopping);
      await yieldToIo();
    }
    return deleted;
  };

  return createPeriodicPrune({
    enabled: options.retainMs > 0,
    prune: pruneInBatches,
    logFields: (deleted) => (deleted > 0 ? { deleted, retainMs: options.retainMs } : undefined),
    what: 'the skill activations',
    intervalMs: options.intervalMs,
    logger: (options.logger ?? silentLogger).child({ component: 'skills' }),
  });
}
