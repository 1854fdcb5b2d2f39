import { z } from 'zod';
import type { SqlDatabase } from '../store/index.js';
import {
  createPeriodicPrune,
  deleteInBatches,
  type PeriodicPrune,
  type RetentionScheduleOptions,
} from '../util/index.js';

/** Ten times the 1,000 that `agents.history` (its states and its tasks) and `agents.conversation` answer at most. */
export const defaultRetainedAgentRows = 10_000;

/** The `agent_runtime:` section of agentd.yaml: how many rows of its records each agent keeps. */
export const agentRetentionConfigSchema = z
  .object({
    /** Newest rows of `agent_state_history` kept per agent; 0 keeps every row. */
    retainStateHistoryRows: z.number().int().nonnegative().default(defaultRetainedAgentRows),
    /** Newest rows of `agent_conversations` kept per agent; 0 keeps every row. */
    retainConversationRows: z.number().int().nonnegative().default(defaultRetainedAgentRows),
    /** Newest rows of `agent_tasks` kept per agent, besides its live tasks, which stay; 0 keeps every row. */
    retainTaskRows: z.number().int().nonnegative().default(defaultRetainedAgentRows),
  })
  .strict();

export type AgentRetentionConfig = z.infer<typeof agentRetentionConfigSchema>;

export interface AgentRetentionOptions extends RetentionScheduleOptions {
  db: SqlDatabase;
  /** Newest rows of `agent_state_history` each agent keeps; 0 keeps them all. */
  stateHistoryRows: number;
  /** Newest rows of `agent_conversations` each agent keeps; 0 keeps them all. */
  conversationRows: number;
  /** Newest rows of `agent_tasks` each agent keeps, and any older task not yet ended; 0 keeps them all. */
  taskRows: number;
  /**
   * Most rows one DELETE removes (default 1,000): each is a transaction of its own, so the write lock is held
   * for one batch at a time, and on SQLite the event loop too.
   */
  batchRows?: number;
}

export interface PrunedAgentRows {
  stateHistory: number;
  conversations: number;
  tasks: number;
}

/** Prunes now, then hourly (`start`); `prune` resolves with how many rows went; `stop` ends it. */
export type AgentRetention = PeriodicPrune<PrunedAgentRows>;

interface RetainedTable {
  name: 'agent_state_history' | 'agent_conversations' | 'agent_tasks';
  keepRows: number;
  /** Deletes the agent's rows past its newest `keepRows`; resolves with how many went. */
  pruneAgent(agentId: string, stopping: () => boolean): Promise<number>;
}

/** A task in neither state is live: its message waits in its agent's mailbox or its turn is running. */
const endedTaskStatuses = "('completed', 'failed')";

/**
 * Keeps the agents' records from growing without bound: every accepted state transition is a row of
 * `agent_state_history`, every line spoken or received one of `agent_conversations` and every task assigned
 * one of `agent_tasks`, and nothing else ever deletes one (an idle `agentd serve`'s `main` writes some 10,000
 * a day from its decision loop alone). Each agent keeps its newest rows by count, not by age, so a quiet agent
 * keeps its record and a busy one cannot outgrow it; a task not yet ended is kept whatever its age, since its
 * turn still has to settle it. A prune the database refuses (a full disk can refuse a DELETE too, a lost
 * connection) is logged and tried again at the next one; the agents go on meanwhile.
 */
export function createAgentRetention(options: AgentRetentionOptions): AgentRetention {
  const { db } = options;
  const batchRows = options.batchRows ?? 1_000;

  /** Deletes the agent's rows of a table ordered by id older than its newest `keepRows`, `batchRows` a statement. */
  const pruneLog =
    (name: 'agent_state_history' | 'agent_conversations', keepRows: number) =>
    async (agentId: string, stopping: () => boolean): Promise<number> => {
      // Through the (agent_id, id) index: reads at most `keepRows` entries, writes nothing when under the limit.
      const newestDropped = await db.get<{ id: number }>(
        `SELECT id FROM ${name} WHERE agent_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?`,
        [agentId, keepRows],
      );
      if (!newestDropped) return 0;
      // No cursor: each batch starts at the agent's oldest row left.
      return deleteInBatches(
        true,
        async () => {
          // A batch is the index range up to its `batchRows`-th row, deleted by range: Postgres planned a
          // DELETE … WHERE id IN (SELECT … LIMIT) as a hash join over the whole table.
          const batchEnd = await db.get<{ id: number }>(
            `SELECT id FROM ${name} WHERE agent_id = ? AND id <= ? ORDER BY id LIMIT 1 OFFSET ?`,
            [agentId, Number(newestDropped.id), batchRows - 1],
          );
          const { changes } = await db.run(`DELETE FROM ${name} WHERE agent_id = ? AND id <= ?`, [
            agentId,
            Number((batchEnd ?? newestDropped).id),
          ]);
          return { deleted: changes, next: batchEnd ? true : undefined };
        },
        stopping,
      );
    };

  /**
   * Deletes the agent's ended tasks older than its newest `keepRows`, in the order `tasks()` reads them
   * (created_at, then id), through the (agent_id, created_at, id) index. Each batch is the range from the last
   * one's end to its `batchRows`-th ended task, so a live task is read once per prune, not once per batch.
   */
  const pruneTasks =
    (keepRows: number) =>
    async (agentId: string, stopping: () => boolean): Promise<number> => {
      const newestDropped = await db.get<{ created_at: number; id: string }>(
        'SELECT created_at, id FROM agent_tasks WHERE agent_id = ? ORDER BY created_at DESC, id DESC LIMIT 1 OFFSET ?',
        [agentId, keepRows],
      );
      if (!newestDropped) return 0;
      const last: [number, string] = [Number(newestDropped.created_at), newestDropped.id];
      // Every task was created after the first cursor; its id is longer than ''.
      return deleteInBatches<[number, string]>(
        [Number.MIN_SAFE_INTEGER, ''],
        async (after) => {
          // The database finds the batch's end: it orders ids by its own collation, as `tasks()` reads them.
          const batchEnd = await db.get<{ created_at: number; id: string }>(
            `SELECT created_at, id FROM agent_tasks WHERE agent_id = ? AND (created_at, id) > (?, ?) AND (created_at, id) <= (?, ?)
             AND status IN ${endedTaskStatuses} ORDER BY created_at, id LIMIT 1 OFFSET ?`,
            [agentId, ...after, ...last, batchRows - 1],
          );
          const end: [number, string] = batchEnd ? [Number(batchEnd.created_at), batchEnd.id] : last;
          const { changes } = await db.run(
            `DELETE FROM agent_tasks WHERE agent_id = ? AND (created_at, id) > (?, ?) AND (created_at, id) <= (?, ?)
             AND status IN ${endedTaskStatuses}`,
            [agentId, ...after, ...end],
          );
          return { deleted: changes, next: batchEnd ? end : undefined };
        },
        stopping,
      );
    };

  const stateHistory: RetainedTable = {
    name: 'agent_state_history',
    keepRows: options.stateHistoryRows,
    pruneAgent: pruneLog('agent_state_history', options.stateHistoryRows),
  };
  // A turn reads its message from the mailbox's own copy, and a restart an agent's state from its `agents` row:
  // nothing but the two readers needs these rows.
  const conversations: RetainedTable = {
    name: 'agent_conversations',
    keepRows: options.conversationRows,
    pruneAgent: pruneLog('agent_conversations', options.conversationRows),
  };
  // `tasks()` (`agents.history`) is the only reader; a task's turn writes its row by id (in_progress, then its
  // end), and only a live task has a turn to come.
  const tasks: RetainedTable = {
    name: 'agent_tasks',
    keepRows: options.taskRows,
    pruneAgent: pruneTasks(options.taskRows),
  };
  const tables = [stateHistory, conversations, tasks];
  const keepsAll = tables.every((table) => table.keepRows === 0);

  /** Walks the table's agents in the order of its index by agent, one seek per agent. */
  const pruneTable = async (table: RetainedTable, stopping: () => boolean): Promise<number> => {
    if (table.keepRows === 0) return 0;
    // Every agent's id is longer than ''.
    return deleteInBatches(
      '',
      async (after) => {
        const next = await db.get<{ agent_id: string }>(
          `SELECT agent_id FROM ${table.name} WHERE agent_id > ? ORDER BY agent_id LIMIT 1`,
          [after],
        );
        if (!next) return { deleted: 0, next: undefined };
        return { deleted: await table.pruneAgent(next.agent_id, stopping), next: next.agent_id };
      },
      stopping,
    );
  };

  return createPeriodicPrune(options, {
    enabled: !keepsAll,
    prune: async (stopping) => ({
      stateHistory: await pruneTable(stateHistory, stopping),
      conversations: await pruneTable(conversations, stopping),
      tasks: await pruneTable(tasks, stopping),
    }),
    logFields: (pruned) =>
      pruned.stateHistory > 0 || pruned.conversations > 0 || pruned.tasks > 0
        ? {
            ...pruned,
            retainStateHistoryRows: stateHistory.keepRows,
            retainConversationRows: conversations.keepRows,
            retainTaskRows: tasks.keepRows,
          }
        : undefined,
    what: "the agents' state history, conversations and tasks",
    component: 'agents',
  });
}
