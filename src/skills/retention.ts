import type { SqlDatabase } from '../store/index.js';
import {
  createPeriodicPrune,
  deleteInBatches,
  type PeriodicPrune,
  type RetentionScheduleOptions,
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
  const batchRows = options.batchRows ?? 1_000;

  /** Deletes the skill's activations before `before`, oldest first, about `batchRows` a statement. */
  const pruneSkill = (skillName: string, before: number, stopping: () => boolean): Promise<number> =>
    // No cursor: each batch starts at the skill's oldest activation left.
    deleteInBatches(
      true,
      async () => {
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
        return { deleted: changes, next: batchEnd ? true : undefined };
      },
      stopping,
    );

  /**
   * Walks the skills in the order of the (skill_name, activated_at) index: one seek gives the next skill and
   * its oldest activation, so a skill with nothing older than the cutoff costs that seek alone.
   */
  const prune = async (stopping: () => boolean, now: number): Promise<number> => {
    if (options.retainMs <= 0) return 0;
    const cutoff = now - options.retainMs;
    // Every skill's name is longer than ''.
    return deleteInBatches(
      '',
      async (after) => {
        const oldest = await db.get<{ skill_name: string; activated_at: number }>(
          'SELECT skill_name, activated_at FROM skill_activations WHERE skill_name > ? ORDER BY skill_name, activated_at LIMIT 1',
          [after],
        );
        if (!oldest) return { deleted: 0, next: undefined };
        const skillName = oldest.skill_name;
        if (Number(oldest.activated_at) >= cutoff) return { deleted: 0, next: skillName };
        const newest = await db.get<{ activated_at: number }>(
          'SELECT activated_at FROM skill_activations WHERE skill_name = ? ORDER BY activated_at DESC LIMIT 1',
          [skillName],
        );
        // A skill last activated before the cutoff keeps its last activation (and any of the same instant).
        const before = Math.min(cutoff, Number(newest?.activated_at ?? cutoff));
        const deleted =
          Number(oldest.activated_at) < before ? await pruneSkill(skillName, before, stopping) : 0;
        return { deleted, next: skillName };
      },
      stopping,
    );
  };

  return createPeriodicPrune(options, {
    enabled: options.retainMs > 0,
    prune,
    logFields: (deleted) => (deleted > 0 ? { deleted, retainMs: options.retainMs } : undefined),
    what: 'the skill activations',
    component: 'skills',
  });
}
