import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import {
  type AgentInboxMessage,
  type AgentInfo,
  type AgentRuntime,
  createAgentRetention,
  createAgentRuntime,
} from '../../src/agents/index.js';
import { type Bus, createBus } from '../../src/bus/index.js';
import { type SqlDatabase, type SqlValue, sqlValueRows } from '../../src/store/index.js';
import { ErrorCodes, type Logger } from '../../src/util/index.js';
import { describeEachDatabase } from '../helpers/databases.js';
import { createFaultyDatabase } from '../helpers/faulty-database.js';

interface Statement {
  sql: string;
  params: SqlValue[];
}

/** `db` with every statement noted (its SQL and parameters) before it runs. */
function recording(db: SqlDatabase): { db: SqlDatabase; statements: Statement[] } {
  const statements: Statement[] = [];
  const note = (sql: string, params: ReadonlyArray<SqlValue> | undefined) =>
    statements.push({ sql, params: [...(params ?? [])] });
  return {
    statements,
    db: {
      ...db,
      all: (sql, params) => {
        note(sql, params);
        return db.all(sql, params);
      },
      get: (sql, params) => {
        note(sql, params);
        return db.get(sql, params);
      },
      run: (sql, params) => {
        note(sql, params);
        return db.run(sql, params);
      },
    },
  };
}

const deletesFrom = (statements: Statement[], table: string) =>
  statements.filter((statement) => statement.sql.startsWith(`DELETE FROM ${table} `));

/** How the database plans a statement; Postgres is told to avoid sequential scans, as a small table invites. */
async function planOf(db: SqlDatabase, statement: Statement): Promise<string> {
  if (db.dialect === 'sqlite') {
    const rows = await db.all<{ detail: string }>(`EXPLAIN QUERY PLAN ${statement.sql}`, statement.params);
    return rows.map((row) => row.detail).join(' | ');
  }
  return db.transaction(async (tx) => {
    await tx.run('SET LOCAL enable_seqscan = off');
    const rows = await tx.all<{ 'QUERY PLAN': string }>(`EXPLAIN ${statement.sql}`, statement.params);
    return rows.map((row) => row['QUERY PLAN']).join(' | ');
  });
}

/** Writes `count` state transitions of the agent, labelled `<agent> <n>` in their reason, oldest first. */
async function seedHistory(db: SqlDatabase, agentId: string, count: number, from = 0): Promise<void> {
  const params: SqlValue[] = [];
  for (let index = from; index < from + count; index++)
    params.push(agentId, 'idle', 'thinking', `${agentId} ${index}`, 1_000 + index);
  await db.run(
    `INSERT INTO agent_state_history (agent_id, old_state, new_state, reason, timestamp) VALUES ${sqlValueRows(count, 5)}`,
    params,
  );
}

/** Writes `count` lines the agent spoke, `<agent> said <n>`, stamped from `at` on, oldest first. */
async function seedLines(
  db: SqlDatabase,
  agentId: string,
  count: number,
  from = 0,
  at = 1_000,
): Promise<void> {
  const params: SqlValue[] = [];
  for (let index = from; index < from + count; index++)
    params.push(agentId, at + index, agentId, `${agentId} said ${index}`, null);
  await db.run(
    `INSERT INTO agent_conversations (agent_id, timestamp, sender, content, recipient) VALUES ${sqlValueRows(count, 5)}`,
    params,
  );
}

const range = (agentId: string, word: string, from: number, to: number) =>
  Array.from({ length: to - from }, (_, index) => `${agentId}${word}${from + index}`);

const reasons = async (db: SqlDatabase, agentId: string) =>
  (
    await db.all<{ reason: string }>(
      'SELECT reason FROM agent_state_history WHERE agent_id = ? ORDER BY id',
      [agentId],
    )
  ).map((row) => row.reason);

const lines = async (db: SqlDatabase, agentId: string) =>
  (
    await db.all<{ content: string }>(
      'SELECT content FROM agent_conversations WHERE agent_id = ? ORDER BY id',
      [agentId],
    )
  ).map((row) => row.content);

/**
 * Waits until `check` passes, polling between turns of the event loop: `vi.waitFor` would advance the fake
 * timers under test, and with them the retention's own.
 */
async function eventually(check: () => Promise<void> | void): Promise<void> {
  const deadline = performance.now() + 5_000;
  for (;;) {
    try {
      await check();
      return;
    } catch (error) {
      if (performance.now() > deadline) throw error;
      await new Promise((resume) => setImmediate(resume));
    }
  }
}

interface LogLine {
  level: 'debug' | 'info' | 'warn' | 'error';
  object: Record<string, unknown>;
  message: string | undefined;
}

function capturingLogger(): Logger & { lines: LogLine[] } {
  const lines: LogLine[] = [];
  const at =
    (level: LogLine['level']) =>
    (object: Record<string, unknown>, message?: string): void => {
      lines.push({ level, object, message });
    };
  const logger: Logger & { lines: LogLine[] } = {
    lines,
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    child: () => logger,
  };
  return logger;
}

const prunedLine = "pruned the agents' state history and conversations";
const refusedLine =
  "could not prune the agents' state history and conversations; trying again at the next prune";
const retentionLines = (logger: { lines: LogLine[] }) =>
  logger.lines.filter((line) => line.message === prunedLine || line.message === refusedLine);

const echo = async (agent: AgentInfo, message: AgentInboxMessage) =>
  `${agent.name} heard: ${message.content}`;

describeEachDatabase('agent records retention', (getDb) => {
  let bus: Bus;
  let runtime: AgentRuntime | undefined;
  beforeEach(() => {
    bus = createBus();
  });
  afterEach(async () => {
    await runtime?.close();
    runtime = undefined;
    vi.useRealTimers();
  });

  it("keeps each agent's newest rows of both tables at start, and the readers still answer the newest", async () => {
    const db = getDb();
    await seedHistory(db, 'busy', 12);
    await seedLines(db, 'busy', 9);
    await seedHistory(db, 'quiet', 3);
    await seedLines(db, 'quiet', 2);
    await seedHistory(db, 'full', 5);
    await seedLines(db, 'full', 4);
    const logger = capturingLogger();
    runtime = createAgentRuntime({
      db,
      bus,
      runTurn: echo,
      logger,
      retainStateHistoryRows: 5,
      retainConversationRows: 4,
    });
    await runtime.start();
    await eventually(() => expect(retentionLines(logger)).toHaveLength(1));
    expect(retentionLines(logger)[0]).toMatchObject({
      level: 'info',
      object: { stateHistory: 7, conversations: 5, retainStateHistoryRows: 5, retainConversationRows: 4 },
    });

    expect(await reasons(db, 'busy')).toEqual(range('busy', ' ', 7, 12));
    expect(await lines(db, 'busy')).toEqual(range('busy', ' said ', 5, 9));
    expect(await reasons(db, 'quiet')).toEqual(range('quiet', ' ', 0, 3));
    expect(await lines(db, 'quiet')).toEqual(range('quiet', ' said ', 0, 2));
    expect(await reasons(db, 'full')).toEqual(range('full', ' ', 0, 5));
    expect(await lines(db, 'full')).toEqual(range('full', ' said ', 0, 4));

    expect((await runtime.history('busy')).map((entry) => entry.reason)).toEqual(range('busy', ' ', 7, 12));
    expect((await runtime.history('busy', { limit: 2 })).map((entry) => entry.reason)).toEqual(
      range('busy', ' ', 10, 12),
    );
    expect((await runtime.conversation('busy')).map((entry) => entry.content)).toEqual(
      range('busy', ' said ', 5, 9),
    );
  });

  it('deletes batchRows rows a statement until every excess row is gone', async () => {
    const { db, statements } = recording(getDb());
    await seedHistory(getDb(), 'busy', 12);
    await seedLines(getDb(), 'busy', 9);
    await seedHistory(getDb(), 'other', 2);
    const retention = createAgentRetention({ db, stateHistoryRows: 2, conversationRows: 2, batchRows: 3 });

    expect(await retention.prune()).toEqual({ stateHistory: 10, conversations: 7 });
    expect(await reasons(getDb(), 'busy')).toEqual(['busy 10', 'busy 11']);
    expect(await lines(getDb(), 'busy')).toEqual(['busy said 7', 'busy said 8']);
    expect(await reasons(getDb(), 'other')).toEqual(['other 0', 'other 1']);
    // 3 + 3 + 3 + 1 and 3 + 3 + 1: a batch short of batchRows was the last.
    const historyBatches = deletesFrom(statements, 'agent_state_history');
    const conversationBatches = deletesFrom(statements, 'agent_conversations');
    expect(historyBatches).toHaveLength(4);
    expect(conversationBatches).toHaveLength(3);
    for (const batch of [...historyBatches, ...conversationBatches]) expect(batch.params.at(-1)).toBe(3);
  });

  it('with nothing to prune deletes nothing, and every statement goes through an index', async () => {
    const { db, statements } = recording(getDb());
    await seedHistory(getDb(), 'a', 3);
    await seedLines(getDb(), 'a', 3);
    await seedHistory(getDb(), 'b', 2);
    await seedLines(getDb(), 'b', 1);
    const retention = createAgentRetention({ db, stateHistoryRows: 3, conversationRows: 3 });

    expect(await retention.prune()).toEqual({ stateHistory: 0, conversations: 0 });
    expect(statements.filter((statement) => /^\s*DELETE\b/i.test(statement.sql))).toEqual([]);
    // Per table: one seek per agent and one past its last, and one look at the row past each agent's limit.
    expect(statements).toHaveLength(2 * (3 + 2));

    await seedHistory(getDb(), 'a', 2, 3);
    await seedLines(getDb(), 'a', 2, 3);
    await createAgentRetention({ db, stateHistoryRows: 3, conversationRows: 3 }).prune();
    const shapes = new Map(statements.map((statement) => [statement.sql, statement]));
    expect(shapes.size).toBe(6);
    for (const statement of shapes.values()) {
      const plan = await planOf(getDb(), statement);
      if (getDb().dialect === 'sqlite') {
        expect(plan).toMatch(/USING (COVERING )?INDEX agent_(state_history|conversations)_agent/);
        expect(plan).not.toMatch(/(^|\| )SCAN /);
      } else {
        expect(plan).toMatch(
          /Index (Only )?Scan (Backward )?(using|on) agent_(state_history|conversations)_agent/,
        );
        expect(plan).not.toMatch(/Seq Scan/);
      }
    }
  });

  it('prunes at start and every retentionIntervalMs, and stops at close', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const db = getDb();
    const logger = capturingLogger();
    await seedHistory(db, 'busy', 4);
    runtime = createAgentRuntime({
      db,
      bus,
      runTurn: echo,
      logger,
      retainStateHistoryRows: 2,
      retainConversationRows: 2,
      retentionIntervalMs: 60_000,
    });
    await runtime.start();
    await runtime.start();
    await eventually(() => expect(retentionLines(logger)).toHaveLength(1));
    expect(await reasons(db, 'busy')).toEqual(['busy 2', 'busy 3']);

    await seedHistory(db, 'busy', 3, 4);
    await seedLines(db, 'busy', 3);
    await vi.advanceTimersByTimeAsync(59_999);
    expect(await reasons(db, 'busy')).toHaveLength(5);
    await vi.advanceTimersByTimeAsync(1);
    await eventually(() => expect(retentionLines(logger)).toHaveLength(2));
    expect(retentionLines(logger)[1]!.object).toMatchObject({ stateHistory: 3, conversations: 1 });
    expect(await reasons(db, 'busy')).toEqual(['busy 5', 'busy 6']);
    expect(await lines(db, 'busy')).toEqual(['busy said 1', 'busy said 2']);

    await runtime.close();
    runtime = undefined;
    await seedHistory(db, 'busy', 3, 7);
    await vi.advanceTimersByTimeAsync(10 * 60_000);
    expect(await reasons(db, 'busy')).toHaveLength(5);
    expect(retentionLines(logger)).toHaveLength(2);
  });

  it('logs a prune the database refused, keeps the agents working, and prunes at the next interval', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const faulty = createFaultyDatabase(getDb());
    const logger = capturingLogger();
    await seedHistory(getDb(), 'busy', 4);
    runtime = createAgentRuntime({
      db: faulty,
      bus,
      runTurn: echo,
      logger,
      retainStateHistoryRows: 2,
      retainConversationRows: 2,
      retentionIntervalMs: 60_000,
    });
    await runtime.spawn({ id: 'scout', name: 'Scout' });

    faulty.failWrites();
    await runtime.start();
    await eventually(() => expect(retentionLines(logger)).toHaveLength(1));
    expect(retentionLines(logger)[0]).toMatchObject({ level: 'warn', message: refusedLine });
    expect(retentionLines(logger)[0]!.object.err).toMatchObject({ code: ErrorCodes.storeUnavailable });
    expect(await reasons(getDb(), 'busy')).toHaveLength(4);

    faulty.heal();
    await runtime.send('scout', { from: 'ana', content: 'still there?' });
    await runtime.whenIdle('scout');
    expect((await runtime.conversation('scout')).map((entry) => entry.content)).toEqual([
      'still there?',
      'Scout heard: still there?',
    ]);

    await vi.advanceTimersByTimeAsync(60_000);
    await eventually(() => expect(retentionLines(logger)).toHaveLength(2));
    // The agent's own turn wrote four transitions meanwhile: its two oldest went too.
    expect(retentionLines(logger)[1]).toMatchObject({
      level: 'info',
      object: { stateHistory: 4, conversations: 0 },
    });
    expect(await reasons(getDb(), 'busy')).toEqual(['busy 2', 'busy 3']);
  });

  it('keeps every row, and reads none, with limits of 0', async () => {
    const { db, statements } = recording(getDb());
    await seedHistory(getDb(), 'busy', 4);
    await seedLines(getDb(), 'busy', 4);
    const retention = createAgentRetention({ db, stateHistoryRows: 0, conversationRows: 0 });
    retention.start();
    expect(await retention.prune()).toEqual({ stateHistory: 0, conversations: 0 });
    await retention.stop();
    expect(statements).toEqual([]);
    expect(await reasons(getDb(), 'busy')).toHaveLength(4);
  });
});
