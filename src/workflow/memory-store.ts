import { appendFileSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { SqlDatabase } from '../store/index.js';
import type { MemoryBackend } from './manifest-schemas.js';

export type MemoryStoreKind = 'task' | 'project' | 'global';

export interface MemoryItem {
  id: string;
  store: MemoryStoreKind;
  /** Order of insertion within the store; newest has the highest. */
  seq: number;
  /** Set for task-store items: the task whose memory this is. */
  taskId?: string;
  projectId: string;
  payload: unknown;
  tags: string[];
  /** Protected items are always kept by context assembly, whatever the budget. */
  protected: boolean;
  metadata: Record<string, unknown>;
  createdAt: number;
}

export type NewMemoryItem = Omit<MemoryItem, 'seq' | 'store'>;

export interface MemoryStore {
  readonly kind: MemoryStoreKind;
  readonly backend: MemoryBackend;
  /** Where the data lives (`memory`, a file path, or the database location). */
  readonly location: string;
  add(item: NewMemoryItem): Promise<MemoryItem>;
  /** Oldest first. `taskId` narrows a task store to one task's memory. */
  list(filter?: { taskId?: string }): Promise<MemoryItem[]>;
  count(): Promise<number>;
}

export interface MemoryStoreOptions {
  kind: MemoryStoreKind;
  /** Count-based retention: the oldest items are deleted when the store holds more. */
  maxItems?: number;
}

/** RAM only; gone when the process exits. */
export function createInMemoryStore(options: MemoryStoreOptions): MemoryStore {
  const items: MemoryItem[] = [];
  let seq = 0;
  return {
    kind: options.kind,
    backend: 'in_memory',
    location: 'memory',
    async add(item) {
      const stored: MemoryItem = { ...item, store: options.kind, seq: ++seq };
      items.push(stored);
      if (options.maxItems !== undefined && items.length > options.maxItems)
        items.splice(0, items.length - options.maxItems);
      return stored;
    },
    async list(filter = {}) {
      return filter.taskId === undefined
        ? items.slice()
        : items.filter((item) => item.taskId === filter.taskId);
    },
    async count() {
      return items.length;
    },
  };
}

/**
 * JSON Lines: one item per line, appended and flushed on every write. Retention appends a tombstone line
 * (`{"$deleted":"<id>"}`) rather than rewriting the file; the file is compacted (rewritten atomically via a
 * temp file and rename) once tombstones outnumber live items.
 */
export function createJsonlMemoryStore(options: MemoryStoreOptions & { path: string }): MemoryStore {
  const { path } = options;
  mkdirSync(dirname(path), { recursive: true });
  const items: MemoryItem[] = [];
  let lines = 0;
  if (existsSync(path)) {
    const deleted = new Set<string>();
    const loaded: MemoryItem[] = [];
    for (const line of readFileSync(path, 'utf8').split('\n')) {
      if (!line.trim()) continue;
      lines++;
      let record: unknown;
      try {
        record = JSON.parse(line);
      } catch {
        // A torn last line after a crash: skip it, keep the rest.
        continue;
      }
      if (typeof record !== 'object' || record === null) continue;
      const deletedId = (record as { $deleted?: unknown }).$deleted;
      if (typeof deletedId === 'string') deleted.add(deletedId);
      else loaded.push(record as MemoryItem);
    }
    for (const item of loaded) if (!deleted.has(item.id)) items.push(item);
  }
  let seq = items.reduce((max, item) => Math.max(max, item.seq), 0);

  const compact = () => {
    const temporary = `${path}.tmp`;
    writeFileSync(temporary, items.map((item) => `${JSON.stringify(item)}\n`).join(''));
    renameSync(temporary, path);
    lines = items.length;
  };
  const enforce = () => {
    if (options.maxItems === undefined || items.length <= options.maxItems) return;
    const removed = items.splice(0, items.length - options.maxItems);
    appendFileSync(path, removed.map((item) => `${JSON.stringify({ $deleted: item.id })}\n`).join(''));
    lines += removed.length;
    if (lines > 2 * items.length + 16) compact();
  };
  enforce();

  return {
    kind: options.kind,
    backend: 'jsonl',
    location: path,
    async add(item) {
      const stored: MemoryItem = { ...item, store: options.kind, seq: ++seq };
      appendFileSync(path, `${JSON.stringify(stored)}\n`);
      lines++;
      items.push(stored);
      enforce();
      return stored;
    },
    async list(filter = {}) {
      return filter.taskId === undefined
        ? items.slice()
        : items.filter((item) => item.taskId === filter.taskId);
    },
    async count() {
      return items.length;
    },
  };
}

interface MemoryRow {
  id: string;
  seq: number;
  task_id: string | null;
  project_id: string;
  payload: string;
  tags: string;
  protected: number;
  metadata: string;
  created_at: number;
}

/**
 * Rows of `workflow_memory` (migration 0006) in a SqlDatabase: the runtime's database, or a SQLite file
 * under the workflow's state dir. `scope` separates workflows; the global store uses the scope `*` so every
 * workflow sharing the database sees it.
 */
export async function createSqlMemoryStore(
  options: MemoryStoreOptions & { db: SqlDatabase; scope: string },
): Promise<MemoryStore> {
  const { db, kind } = options;
  const scope = kind === 'global' ? '*' : options.scope;
  const top = await db.get<{ seq: number | null }>(
    'SELECT MAX(seq) AS seq FROM workflow_memory WHERE scope = ? AND store = ?',
    [scope, kind],
  );
  let seq = Number(top?.seq ?? 0);
  const fromRow = (row: MemoryRow): MemoryItem => ({
    id: row.id,
    store: kind,
    seq: Number(row.seq),
    ...(row.task_id === null ? {} : { taskId: row.task_id }),
    projectId: row.project_id,
    payload: JSON.parse(row.payload),
    tags: JSON.parse(row.tags),
    protected: Number(row.protected) === 1,
    metadata: JSON.parse(row.metadata),
    createdAt: Number(row.created_at),
  });
  const columns = 'id, seq, task_id, project_id, payload, tags, protected, metadata, created_at';
  return {
    kind,
    backend: 'sqlite',
    location: db.location,
    async add(item) {
      const stored: MemoryItem = { ...item, store: kind, seq: ++seq };
      await db.transaction(async (tx) => {
        await tx.run(
          `INSERT INTO workflow_memory (id, scope, store, seq, task_id, project_id, payload, tags, protected, metadata, created_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          [
            stored.id,
            scope,
            kind,
            stored.seq,
            stored.taskId ?? null,
            stored.projectId,
            JSON.stringify(stored.payload ?? null),
            JSON.stringify(stored.tags),
            stored.protected ? 1 : 0,
            JSON.stringify(stored.metadata),
            stored.createdAt,
          ],
        );
        if (options.maxItems !== undefined) {
          const cutoff = await tx.get<{ seq: number }>(
            'SELECT seq FROM workflow_memory WHERE scope = ? AND store = ? ORDER BY seq DESC LIMIT 1 OFFSET ?',
            [scope, kind, options.maxItems],
          );
          if (cutoff)
            await tx.run('DELETE FROM workflow_memory WHERE scope = ? AND store = ? AND seq <= ?', [
              scope,
              kind,
              Number(cutoff.seq),
            ]);
        }
      });
      return stored;
    },
    async list(filter = {}) {
      const rows =
        filter.taskId === undefined
          ? await db.all<MemoryRow>(
              `SELECT ${columns} FROM workflow_memory WHERE scope = ? AND store = ? ORDER BY seq`,
              [scope, kind],
            )
          : await db.all<MemoryRow>(
              `SELECT ${columns} FROM workflow_memory WHERE scope = ? AND store = ? AND task_id = ? ORDER BY seq`,
              [scope, kind, filter.taskId],
            );
      return rows.map(fromRow);
    },
    async count() {
      const row = await db.get<{ n: number }>(
        'SELECT COUNT(*) AS n FROM workflow_memory WHERE scope = ? AND store = ?',
        [scope, kind],
      );
      return Number(row?.n ?? 0);
    },
  };
}
