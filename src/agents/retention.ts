import { z } from 'zod';
import type { SqlDatabase } from '../store/index.js';
import {
  createPeriodicPrune,
  type Logger,
  type PeriodicPrune,
  silentLogger,
  yieldToIo,
} from '../util/index.js';

/** Ten times the 1,000 that `agents.history` and `agents.conversation` answer at most. */
export const defaultRetainedAgentRows = 10_000;

/** The `agent_runtime:` section of agentd.yaml: how many rows of its records each agent keeps. */
export const agentRetentionConfigSchema = z
  .object({
    /** Newest rows of `agent_state_history` kept per agent; 0 keeps every row. */
    retainStateHistoryRows: z.number().int().nonnegative().default(defaultRetainedAgentRows),
    /** Newest rows of `agent_conversations` kept per agent; 0 keeps every row. */
    retainConversationRows: z.number().int().nonnegative().default(defaultRetainedAgentRows),
  })
  .strict();

export type AgentRetentionConfig = z.infer<typeof agentRetentionConfigSchema>;

export interface AgentRetentionOptions {
  db: SqlDatabase;
  /** Newest rows of `agent_state_history` each agent keeps; 0 keeps them all. */
  stateHistoryRows: number;
  /** Newest rows of `agent_conversations` each agent keeps; 0 keeps them all. */
  conversationRows: number;
  /** Time from the end of one prune to the start of the next (default an hour). */
  intervalMs?: number;
  /**
   * Most rows one DELETE removes (default 1,000): each is a transaction of its own, so the write lock is held
   * for one batch at a time, and on SQLite the event loop too.
   */
  batchRows?: number;
  logger?: Logger;
}

export interface PrunedAgentRows {
  stateHistory: number;
  conversations: number;
}

/** Prunes now, then hourly (`start`); `prune` resolves with how many rows went; `stop` ends it. */
export type AgentRetention = PeriodicPrune<PrunedAgentRows>;

interface RetainedTable {
  name: 'agent_state_history' | 'agent_conversations';
  keepRows: number;
}

const hourMs = 60 * 60 * 1000;

/**
 * Keeps the agents' records from growing without bound: every accepted state transition is a row of
 * `agent_state_history` and every line spoken or received one of `agent_conversations`, and nothing else ever
 * deletes one (an idle `agentd serve`'s `main` writes some 10,000 a day from its decision loop alone). Each agent
 * keeps its newest rows by count, not by age, so a quiet agent keeps its record and a busy one cannot outgrow
 * it. A prune the database refuses (a full disk can refuse a DELETE too, a lost connection) is logged and
 * tried again at the next one; the agents go on meanwhile.
 */
export function createAgentRetention(options: AgentRetentionOptions): AgentRetention {
  const { db } = options;
  const batchRows = options.batchRows ?? 1_000;
  const stateHistory: RetainedTable = { name: 'agent_state_history', keepRows: options.stateHistoryRows };
  // A turn reads its message from the mailbox's own copy, and a restart an agent's state from its `agents` row:
  // nothing but the two readers needs these rows.
  const conversations: RetainedTable = { name: 'agent_conversations', keepRows: options.conversationRows };
  const keepsAll = stateHistory.keepRows === 0 && conversations.keepRows === 0;

  /** Deletes the agent's rows older than its newest `keepRows`, `batchRows` a statement. */
  const pruneAgent = async (
    table: RetainedTable,
    agentId: string,
    stopping: () => boolean,
  ): Promise<number> => {
    // Through the (agent_id, id) index: reads at most `keepRows` entries, writes nothing when under the limit.
    const newestDropped = await db.get<{ id: number }>(
      `SELECT id FROM ${table.name} WHERE agent_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?`,
      [agentId, table.keepRows],
    );
    if (!newestDropped) return 0;
    let deleted = 0;
    for (;;) {
      const { changes } = await db.run(
        `DELETE FROM ${table.name} WHERE id IN (SELECT id FROM ${table.name} WHERE agent_id = ? AND id <= ? ORDER BY id LIMIT ?)`,
        [agentId, Number(newestDropped.id), batchRows],
      );
      deleted += changes;
      if (changes < batchRows || stopping()) return deleted;
      // Turns, deliveries and the runtime's own writes go between two batches.
      await yieldToIo();
    }
  };

  /** Walks the table's agents in the order of its (agent_id, id) index, one seek per agent. */
  const pruneTable = async (table: RetainedTable, stopping: () => boolean): Promise<number> => {
    if (table.keepRows === 0) return 0;
    let deleted = 0;
    // Every agent's id is longer than ''.
    let after = '';
    while (!stopping()) {
      const next = await db.get<{ agent_id: string }>(
        `SELECT agent_id FROM ${table.name} WHERE agent_id > ? ORDER BY agent_id LIMIT 1`,
        [after],
      );
      if (!next) break;
      after = next.agent_id;
      deleted += await pruneAgent(table, after, stopping);
      await yieldToIo();
    }
    return deleted;
  };

  const periodic = createPeriodicPrune({
    prune: async (stopping) => ({
      stateHistory: await pruneTable(stateHistory, stopping),
      conversations: await pruneTable(conversations, stopping),
    }),
    logFields: (pruned) =>
      pruned.stateHistory > 0 || pruned.conversations > 0
        ? {
            ...pruned,
            retainStateHistoryRows: stateHistory.keepRows,
            retainConversationRows: conversations.keepRows,
          }
        : undefined,
    what: "the agents' state history and conversations",
    intervalMs: options.intervalMs ?? hourMs,
    logger: (options.logger ?? silentLogger).child({ component: 'agents' }),
  });
  return {
    ...periodic,
    start() {
      if (!keepsAll) periodic.start();
    },
  };
}
