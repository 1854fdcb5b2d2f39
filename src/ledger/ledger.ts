import type { Bus } from '../bus/index.js';
import type { SqlDatabase } from '../store/index.js';
import { type Clock, ErrorCodes, formatZodIssues, systemClock, UserInputError } from '../util/index.js';

declare module '../bus/events.js' {
  interface BusEventMap {
    /** A ledger entry was written. `content` is cut to 500 characters for the bus. */
    'ledger:appended': { workItemId: string; seq: number; entryType: LedgerEntryType; content: string };
  }
}

/** The ledger's entry types (a closed set: tools and the CLI validate against it). */
export const ledgerEntryTypes = ['plan', 'finding', 'decision', 'step', 'error', 'note'] as const;
export type LedgerEntryType = (typeof ledgerEntryTypes)[number];

export interface LedgerEntry {
  workItemId: string;
  /** 1, 2, 3, … without gaps within one work item. */
  seq: number;
  entryType: LedgerEntryType;
  content: string;
  createdAt: number;
}

export interface LedgerReadOptions {
  entryType?: LedgerEntryType;
  /** Only the last N matching entries (still returned in seq order). */
  lastN?: number;
}

export interface Ledger {
  /** Appends one entry; seq is assigned atomically, gapless under concurrent appends from any process. */
  append(workItemId: string, entry: { entryType: LedgerEntryType; content: string }): Promise<LedgerEntry>;
  /** Entries of a work item in seq order. */
  read(workItemId: string, options?: LedgerReadOptions): Promise<LedgerEntry[]>;
  /** `finding` entries across all work items since `sinceMs`, newest first — for the awareness digest. */
  listRecentFindings(options: { sinceMs: number; limit: number }): Promise<LedgerEntry[]>;
}

export interface CreateLedgerOptions {
  db: SqlDatabase;
  clock?: Clock;
  /** When given, every append publishes `ledger:appended`. */
  bus?: Bus;
  /** Longest accepted entry; longer content is refused, not cut, so the ledger never holds partial facts. */
  maxContentChars?: number;
}

/**
 * Made at the first append: the module also formats entries for the command line's `ledger show --url`,
 * which appends nothing and need not load zod (about 85 ms of that command's start here).
 */
const appendSchemaOf = async () => {
  const { z } = await import('zod');
  return z.object({
    workItemId: z.string().min(1).max(200),
    entryType: z.enum(ledgerEntryTypes),
    content: z.string().trim().min(1, 'content must not be empty'),
  });
};

interface LedgerRow {
  work_item_id: string;
  seq: number;
  entry_type: LedgerEntryType;
  content: string;
  created_at: number;
}

/**
 * The next seq is one past the work item's last: rows are append-only (triggers refuse UPDATE and DELETE),
 * so MAX(seq) is the last seq handed out, found on the primary key. No head counter to bump: the append is
 * one row written, and needs no transaction of its own.
 */
const appendOnSqlite = `INSERT INTO work_ledger (work_item_id, seq, entry_type, content, created_at)
  SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ? FROM work_ledger WHERE work_item_id = ?
  RETURNING seq`;
/**
 * Postgres reads MAX(seq) without a lock, so the head counter's row lock serialises appenders. The counter's
 * bump is a data-modifying CTE of the row's INSERT: one autocommitted statement, one round trip, and a
 * failing insert takes the bump back with it (no gap).
 */
const appendOnPostgres = `WITH head AS (
    INSERT INTO work_ledger_heads (work_item_id, last_seq) VALUES (?, 1)
    ON CONFLICT (work_item_id) DO UPDATE SET last_seq = work_ledger_heads.last_seq + 1
    RETURNING last_seq)
  INSERT INTO work_ledger (work_item_id, seq, entry_type, content, created_at)
  SELECT ?, last_seq, ?, ?, ?::bigint FROM head
  RETURNING seq`;

const toEntry = (row: LedgerRow): LedgerEntry => ({
  workItemId: row.work_item_id,
  seq: Number(row.seq),
  entryType: row.entry_type,
  content: row.content,
  createdAt: Number(row.created_at),
});

export function createLedger(options: CreateLedgerOptions): Ledger {
  const { db, bus } = options;
  const clock = options.clock ?? systemClock;
  const maxContentChars = options.maxContentChars ?? 20_000;
  let appendSchema: Awaited<ReturnType<typeof appendSchemaOf>> | undefined;

  return {
    async append(workItemId, entry) {
      appendSchema ??= await appendSchemaOf();
      // A plain literal: spreading `entry` into it would cost V8 its slow path on every append.
      const parsed = appendSchema.safeParse({
        workItemId,
        entryType: entry.entryType,
        content: entry.content,
      });
      if (!parsed.success) {
        throw new UserInputError({
          code: ErrorCodes.invalidRequest,
          message: `Invalid ledger entry: ${formatZodIssues(parsed.error.issues)}. entry_type is one of ${ledgerEntryTypes.join(', ')}.`,
        });
      }
      if (parsed.data.content.length > maxContentChars) {
        throw new UserInputError({
          code: ErrorCodes.payloadTooLarge,
          message: `Ledger entry is ${parsed.data.content.length} characters; the limit is ${maxContentChars}. Summarise it.`,
        });
      }
      const createdAt = clock.now();
      const { entryType, content } = parsed.data;
      // One autocommitted statement on either dialect: it is committed when it returns. On SQLite it takes
      // the write lock before it reads MAX(seq), so appenders in any process are serialised.
      const row =
        db.dialect === 'sqlite'
          ? await db.get<{ seq: number }>(appendOnSqlite, [
              workItemId,
              entryType,
              content,
              createdAt,
              workItemId,
            ])
          : await db.get<{ seq: number }>(appendOnPostgres, [
              workItemId,
              workItemId,
              entryType,
              content,
              createdAt,
            ]);
      const seq = Number(row!.seq);
      const appended: LedgerEntry = {
        workItemId,
        seq,
        entryType,
        content,
        createdAt,
      };
      bus?.publish(
        'ledger:appended',
        { workItemId, seq, entryType: appended.entryType, content: appended.content.slice(0, 500) },
        { workItemId },
      );
      return appended;
    },

    async read(workItemId, readOptions = {}) {
      const conditions = ['work_item_id = ?'];
      const params: Array<string | number> = [workItemId];
      if (readOptions.entryType) {
        conditions.push('entry_type = ?');
        params.push(readOptions.entryType);
      }
      if (readOptions.lastN !== undefined) {
        params.push(Math.max(0, Math.floor(readOptions.lastN)));
        const rows = await db.all<LedgerRow>(
          `SELECT * FROM (SELECT work_item_id, seq, entry_type, content, created_at FROM work_ledger
             WHERE ${conditions.join(' AND ')} ORDER BY seq DESC LIMIT ?) AS recent ORDER BY seq ASC`,
          params,
        );
        return rows.map(toEntry);
      }
      const rows = await db.all<LedgerRow>(
        `SELECT work_item_id, seq, entry_type, content, created_at FROM work_ledger WHERE ${conditions.join(' AND ')} ORDER BY seq ASC`,
        params,
      );
      return rows.map(toEntry);
    },

    async listRecentFindings({ sinceMs, limit }) {
      const rows = await db.all<LedgerRow>(
        `SELECT work_item_id, seq, entry_type, content, created_at FROM work_ledger
         WHERE entry_type = 'finding' AND created_at >= ? ORDER BY created_at DESC, work_item_id, seq DESC LIMIT ?`,
        [sinceMs, Math.max(0, Math.floor(limit))],
      );
      return rows.map(toEntry);
    },
  };
}

/** The `ledger_read` format: one `[seq] type: content` line per entry. */
export function formatLedgerEntries(entries: ReadonlyArray<LedgerEntry>): string {
  return entries.map((entry) => `[${entry.seq}] ${entry.entryType}: ${entry.content}`).join('\n');
}
