import type { SqlDatabase } from '../../src/store/index.js';
import { writeStatement } from './faulty-database.js';

/**
 * `db` with its commits counted: top-level transactions (nested ones are savepoints of those) and write
 * statements issued outside any transaction, each of which commits on its own (on Postgres a memory commit
 * is one such statement). The full-text index's batches are not counted: on SQLite they run 20 ms after an
 * insert, within a later commit's window on a loaded machine.
 */
export function countingCommits(db: SqlDatabase): { db: SqlDatabase; count(): number } {
  let count = 0;
  let depth = 0;
  const counted: SqlDatabase = Object.create(db);
  const countWrite = (sql: string) => {
    if (depth === 0 && writeStatement.test(sql)) count++;
  };
  counted.run = (sql, params) => {
    countWrite(sql);
    return db.run(sql, params);
  };
  counted.all = (sql, params) => {
    countWrite(sql);
    return db.all(sql, params);
  };
  counted.get = (sql, params) => {
    countWrite(sql);
    return db.get(sql, params);
  };
  counted.transaction = async (work, options) => {
    const outermost = depth === 0;
    let indexBatch = false;
    depth++;
    try {
      return await db.transaction((tx) => {
        const watched: typeof tx = Object.create(tx);
        watched.run = (sql, params) => {
          if (sql.startsWith('INSERT INTO memory_fts ')) indexBatch = true;
          return tx.run(sql, params);
        };
        return work(watched);
      }, options);
    } finally {
      depth--;
      if (outermost && !indexBatch) count++;
    }
  };
  return { db: counted, count: () => count };
}
