import type { SqlDatabase } from '../store/index.js';

/**
 * The SQLite full-text index written behind the entries (migration 0022). An entry's commit no longer
 * indexes it: entries with a row id above `memory_fts_progress.indexed_up_to` are the backlog, which one
 * transaction indexes at a time, soon after the appends (`delayMs`, sooner past `maxBacklogRows`) and always
 * before a full-text read, so a search still sees every entry committed before it. A chat turn's commit
 * wrote about 12 pages of the index (its content, size and term B-trees and a new segment) for two
 * entries; a backlog of many entries writes one segment. Row ids only grow (AUTOINCREMENT), so the mark
 * names exactly what is indexed, and a crash leaves nothing lost: the backlog is read from the entries.
 */
export interface FtsBacklog {
  /** Entries were inserted (in a transaction that may still be open): index them soon. */
  noteInserted(rows: number): void;
  /**
   * Before a full-text read: indexes the backlog this process noted, and another process's left behind as
   * seen at most `otherWritersMs` ago. With `everything`, looks at the database now (a flush, a merge).
   */
  catchUp(everything?: boolean): Promise<void>;
}

/**
 * The same search context the insert trigger of migration 0015 gave each entry: its content, and for a
 * conversational turn the two previous turns of its key (newest first). Earlier turns are all committed
 * before a later one is indexed, so indexing later sees what the trigger saw.
 */
export const indexBacklogSql =
  'INSERT INTO memory_fts (rowid, content, before) SELECT n.id, n.content, ' +
  "CASE WHEN n.kind = 'entry' AND n.role IN ('user', 'assistant') THEN coalesce((" +
  'SELECT group_concat(content, char(10)) FROM (SELECT p.content FROM memory_entries p ' +
  'WHERE p.session_key = n.session_key AND p.memory_id < n.memory_id ' +
  "AND p.kind = 'entry' AND p.role IN ('user', 'assistant') AND p.state <> 'tombstone' " +
  "ORDER BY p.memory_id DESC LIMIT 2)), '') ELSE '' END " +
  "FROM memory_entries n WHERE n.id > ? AND n.id <= ? AND n.state <> 'tombstone' ORDER BY n.id";

export function createFtsBacklog(
  db: SqlDatabase,
  options: {
    delayMs: number;
    maxBacklogRows: number;
    /** How long a read trusts that no other process left entries unindexed (see `catchUp`). */
    otherWritersMs: number;
    onError: (error: unknown) => void;
  },
): FtsBacklog {
  let noted = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let running: Promise<void> | undefined;

  const indexNow = (): Promise<void> =>
    db.transaction(async (tx) => {
      const [mark, highest] = await Promise.all([
        tx.get<{ n: number }>('SELECT indexed_up_to AS n FROM memory_fts_progress WHERE id = 1'),
        tx.get<{ n: number | null }>('SELECT max(id) AS n FROM memory_entries'),
      ]);
      const from = Number(mark?.n ?? 0);
      const to = Number(highest?.n ?? 0);
      if (to <= from) return;
      await tx.run(indexBacklogSql, [from, to]);
      await tx.run('UPDATE memory_fts_progress SET indexed_up_to = ? WHERE id = 1', [to]);
    });

  /** Two reads of B-tree ends, without the write lock: most full-text reads find no backlog. */
  const backlogged = async (): Promise<boolean> => {
    const row = await db.get<{ pending: number }>(
      'SELECT coalesce((SELECT max(id) FROM memory_entries), 0) > ' +
        '(SELECT indexed_up_to FROM memory_fts_progress WHERE id = 1) AS pending',
    );
    return Number(row?.pending ?? 0) === 1;
  };

  /** When the database was last found without a backlog that this process did not note itself. */
  let lookedAtMs = Number.NEGATIVE_INFINITY;

  /**
   * One indexing transaction at a time; a call while one runs waits for it and then looks again. With
   * nothing noted since the last look, the database is looked at again only after `otherWritersMs`: this
   * process's entries are always indexed before its reads, another process's within that time (which that
   * process indexes itself unless it stopped first).
   */
  const catchUp = async (everything = false): Promise<void> => {
    while (running) await running.catch(() => {});
    const now = performance.now();
    if (!everything && noted === 0 && timer === undefined && now - lookedAtMs < options.otherWritersMs)
      return;
    lookedAtMs = now;
    if (timer) {
      clearTimeout(timer);
      timer = undefined;
    }
    noted = 0;
    running = (async () => {
      if (await backlogged()) await indexNow();
    })().finally(() => {
      running = undefined;
    });
    return running;
  };

  const inBackground = () => {
    timer = undefined;
    catchUp(true).catch(options.onError);
  };

  return {
    noteInserted(rows) {
      noted += rows;
      if (noted >= options.maxBacklogRows) {
        if (timer) clearTimeout(timer);
        timer = setTimeout(inBackground, 0);
        timer.unref?.();
      } else if (!timer) {
        timer = setTimeout(inBackground, options.delayMs);
        timer.unref?.();
      }
    },
    catchUp,
  };
}
