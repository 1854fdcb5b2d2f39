import { z } from 'zod';
import type { SqlDatabase } from '../store/index.js';
import { decodeJson } from '../util/index.js';
import type { MemoryBackend } from './manifest-schemas.js';

export type MemoryStoreKind = 'task' | 'project' | 'global';

export interface WorkflowMemoryItem {
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

export type NewWorkflowMemoryItem = Omit<WorkflowMemoryItem, 'seq' | 'store'>;

export interface MemoryStore {
  readonly kind: MemoryStoreKind;
  readonly backend: MemoryBackend;
  /** Where the data lives (`memory`, or the database location). */
  readonly location: string;
  add(item: NewWorkflowMemoryItem): Promise<WorkflowMemoryItem>;
  /** Oldest first. `taskId` narrows a task store to one task's memory. */
  list(filter?: { taskId?: string }): Promise<WorkflowMemoryItem[]>;
  count(): Promise<number>;
}

export interface MemoryStoreOptions {
  kind: MemoryStoreKind;
  /** Count-based retention: the oldest items are deleted when the store holds more. */
  maxItems?: number;
}

/** RAM only; gone when the process exits. */
export function createInMemoryStore(options: MemoryStoreOptions): MemoryStore {
  const items: WorkflowMemoryItem[] = [];
  let seq = 0;
  return {
    kind: options.kind,
    backend: 'in_memory',
    location: 'memory',
    async add(item) {
      const stored: WorkflowMemoryItem = { ...item, store: options.kind, seq: ++seq };
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

const tagsSchema = z.array(z.string());
const metadataSchema = z.record(z.string(), z.unknown());

/**
 * Rows of `workflow_memory` (migration 0006) in the platform's database. `scope` separates workflows; the global store uses the scope `*` so every
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
  const fromRow = (row: MemoryRow): WorkflowMemoryItem => ({
    id: row.id,
    store: kind,
    seq: Number(row.seq),
    ...(row.task_id === null ? {} : { taskId: row.task_id }),
    projectId: row.project_id,
    payload: decodeJson(row.payload, z.unknown(), { what: `workflow memory item ${row.id}` }),
    tags: decodeJson(row.tags, tagsSchema, { what: `the tags of workflow memory item ${row.id}` }),
    protected: Number(row.protected) === 1,
    metadata: decodeJson(row.metadata, metadataSchema, {
      what: `the metadata of workflow memory item ${row.id}`,
    }),
    createdAt: Number(row.created_at),
  });
  const columns = 'id, seq, task_id, project_id, payload, tags, protected, metadata, created_at';
  return {
    kind,
    backend: 'sqlite',
    location: db.location,
    async add(item) {
      const stored: WorkflowMemoryItem = { ...item, store: kind, seq: ++seq };
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
