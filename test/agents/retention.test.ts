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
import { ErrorCodes } from '../../src/util/index.js';
import { describeEachDatabase } from '../helpers/databases.js';
import { createFaultyDatabase } from '../helpers/faulty-database.js';
import type { RecordedStatement } from '../helpers/query-plans.js';
import {
  capturingLogger,
  deletes,
  eventually,
  type LogLine,
  planOf,
  recording,
} from '../helpers/retention.js';

const deletesFrom = (statements: RecordedStatement[], table: string) =>
  statements.filter((statement) => statement.sql.startsWith(`DELETE FROM ${table} `));

/** A small table invites Postgres to a bitmap scan, which returns rows out of the index's order, to be sorted. */
const inIndexOrder = { bitmapScans: false };

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

type TaskStatus = 'assigned' | 'in_progress' | 'completed' | 'failed';

/**
 * Writes a task of the agent for each status, `<agent>-<nn>` by their index, oldest first: `createdAt` stamps
 * each (by default a millisecond apart), so tasks may share an instant, as tasks assigned together do.
 */
async function seedTasks(
  db: SqlDatabase,
  agentId: string,
  statuses: TaskStatus[],
  createdAt = (index: number) => 1_000 + index,
): Promise<void> {
  const params: SqlValue[] = [];
  statuses.forEach((status, index) => {
    const ended = status === 'completed' || status === 'failed';
    params.push(
      `${agentId}-${String(index).padStart(2, '0')}`,
      agentId,
      `${agentId} task ${index}`,
      status,
      ended ? `${status} ${index}` : null,
      createdAt(index),
      ended ? createdAt(index) + 1 : null,
    );
  });
  await db.run(
    `INSERT INTO agent_tasks (id, agent_id, task_name, status, result, created_at, completed_at) VALUES ${sqlValueRows(statuses.length, 7)}`,
    params,
  );
}

const taskIds = async (db: SqlDatabase, agentId: string) =>
  (await db.all<{ id: string }>('SELECT id FROM agent_tasks WHERE agent_id = ? ORDER BY id', [agentId])).map(
    (row) => row.id,
  );

const ended = (count: number): TaskStatus[] =>
  Array.from({ length: count }, (_, index) => (index % 3 === 2 ? 'failed' : 'completed'));

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

const prunedLine = "pruned the agents' state history, conversations and tasks";
const refusedLine =
  "could not prune the agents' state history, conversations and tasks; trying again at the next prune";
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
    const retention = createAgentRetention({
      db,
      stateHistoryRows: 2,
      conversationRows: 2,
      taskRows: 0,
      batchRows: 3,
    });

    const idsOf = async (table: string) =>
      (await getDb().all<{ id: number }>(`SELECT id FROM ${table} WHERE agent_id = 'busy' ORDER BY id`)).map(
        (row) => Number(row.id),
      );
    const historyIds = await idsOf('agent_state_history');
    const lineIds = await idsOf('agent_conversations');

    expect(await retention.prune()).toEqual({ stateHistory: 10, conversations: 7, tasks: 0 });
    expect(await reasons(getDb(), 'busy')).toEqual(['busy 10', 'busy 11']);
    expect(await lines(getDb(), 'busy')).toEqual(['busy said 7', 'busy said 8']);
    expect(await reasons(getDb(), 'other')).toEqual(['other 0', 'other 1']);
    // 3 + 3 + 3 + 1 and 3 + 3 + 1, each batch the range up to its third row; the last up to the newest dropped.
    const ends = (table: string) =>
      deletesFrom(statements, table).map((batch) => ({
        agent: batch.params[0],
        upTo: Number(batch.params[1]),
      }));
    expect(ends('agent_state_history')).toEqual(
      [2, 5, 8, 9].map((index) => ({ agent: 'busy', upTo: historyIds[index] })),
    );
    expect(ends('agent_conversations')).toEqual(
      [2, 5, 6].map((index) => ({ agent: 'busy', upTo: lineIds[index] })),
    );
  });

  it('with nothing to prune deletes nothing, and every statement goes through an index', async () => {
    const { db, statements } = recording(getDb());
    await seedHistory(getDb(), 'a', 3);
    await seedLines(getDb(), 'a', 3);
    await seedHistory(getDb(), 'b', 2);
    await seedLines(getDb(), 'b', 1);
    const retention = createAgentRetention({ db, stateHistoryRows: 3, conversationRows: 3, taskRows: 0 });

    expect(await retention.prune()).toEqual({ stateHistory: 0, conversations: 0, tasks: 0 });
    expect(deletes(statements)).toEqual([]);
    // Per table: one seek per agent and one past its last, and one look at the row past each agent's limit.
    expect(statements).toHaveLength(2 * (3 + 2));

    await seedHistory(getDb(), 'a', 2, 3);
    await seedLines(getDb(), 'a', 2, 3);
    await createAgentRetention({ db, stateHistoryRows: 3, conversationRows: 3, taskRows: 0 }).prune();
    const shapes = new Map(statements.map((statement) => [statement.sql, statement]));
    expect(shapes.size).toBe(8);
    for (const statement of shapes.values()) {
      const plan = await planOf(getDb(), statement, inIndexOrder);
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
    await seedTasks(getDb(), 'busy', ended(4));
    runtime = createAgentRuntime({
      db: faulty,
      bus,
      runTurn: echo,
      logger,
      retainStateHistoryRows: 2,
      retainConversationRows: 2,
      retainTaskRows: 2,
      retentionIntervalMs: 60_000,
    });
    await runtime.spawn({ id: 'scout', name: 'Scout' });

    faulty.failWrites();
    await runtime.start();
    await eventually(() => expect(retentionLines(logger)).toHaveLength(1));
    expect(retentionLines(logger)[0]).toMatchObject({ level: 'warn', message: refusedLine });
    expect(retentionLines(logger)[0]!.object.err).toMatchObject({ code: ErrorCodes.storeUnavailable });
    expect(await reasons(getDb(), 'busy')).toHaveLength(4);
    expect(await taskIds(getDb(), 'busy')).toHaveLength(4);

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
      object: { stateHistory: 4, conversations: 0, tasks: 2 },
    });
    expect(await reasons(getDb(), 'busy')).toEqual(['busy 2', 'busy 3']);
    expect(await taskIds(getDb(), 'busy')).toEqual(['busy-02', 'busy-03']);
  });

  it('keeps every row, and reads none, with limits of 0', async () => {
    const { db, statements } = recording(getDb());
    await seedHistory(getDb(), 'busy', 4);
    await seedLines(getDb(), 'busy', 4);
    const retention = createAgentRetention({ db, stateHistoryRows: 0, conversationRows: 0, taskRows: 0 });
    retention.start();
    expect(await retention.prune()).toEqual({ stateHistory: 0, conversations: 0, tasks: 0 });
    await retention.stop();
    expect(statements).toEqual([]);
    expect(await reasons(getDb(), 'busy')).toHaveLength(4);
  });

  it("keeps each agent's newest tasks and every live one, and tasks() answers its newest as before", async () => {
    const db = getDb();
    // Two tasks an instant: the count's boundary falls between two tasks of one millisecond, ordered by id.
    const statuses: TaskStatus[] = [
      'completed',
      'assigned',
      'failed',
      'in_progress',
      'completed',
      'completed',
      'assigned',
      'completed',
      'failed',
      'completed',
    ];
    await seedTasks(db, 'busy', statuses, (index) => 1_000 + Math.floor(index / 2));
    await seedTasks(db, 'quiet', ended(3));
    await seedTasks(db, 'stuck', ['assigned', 'in_progress', 'assigned']);
    const logger = capturingLogger();
    runtime = createAgentRuntime({ db, bus, runTurn: echo, logger, retainTaskRows: 5 });
    const newestBefore = await runtime.tasks('busy', { limit: 5 });
    const quietBefore = await runtime.tasks('quiet');

    await runtime.start();
    await eventually(() => expect(retentionLines(logger)).toHaveLength(1));
    expect(retentionLines(logger)[0]).toMatchObject({
      level: 'info',
      object: { stateHistory: 0, conversations: 0, tasks: 3, retainTaskRows: 5 },
    });
    // busy-04 is the sixth newest: it goes, and busy-05 of its millisecond stays; busy-01 and busy-03 are live.
    expect(await taskIds(db, 'busy')).toEqual([
      'busy-01',
      'busy-03',
      'busy-05',
      'busy-06',
      'busy-07',
      'busy-08',
      'busy-09',
    ]);
    expect(await runtime.tasks('busy', { limit: 5 })).toEqual(newestBefore);
    expect((await runtime.tasks('busy')).map((task) => task.status)).toEqual([
      'assigned',
      'in_progress',
      'completed',
      'assigned',
      'completed',
      'failed',
      'completed',
    ]);
    expect(await runtime.tasks('quiet')).toEqual(quietBefore);
    expect(await taskIds(db, 'stuck')).toEqual(['stuck-00', 'stuck-01', 'stuck-02']);
  });

  it('keeps the tasks an agent has not answered yet, however many, and prunes them once they end', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const db = getDb();
    const logger = capturingLogger();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    await seedTasks(db, 'worker', ended(3));
    runtime = createAgentRuntime({
      db,
      bus,
      logger,
      runTurn: async (agent, message) => {
        await gate;
        return echo(agent, message);
      },
      retainTaskRows: 2,
      retentionIntervalMs: 60_000,
    });
    await runtime.start();
    await eventually(() => expect(retentionLines(logger)).toHaveLength(1));
    expect(retentionLines(logger)[0]!.object).toMatchObject({ tasks: 1 });
    try {
      await runtime.spawn({ id: 'worker', name: 'Worker' });
      const assigned: string[] = [];
      for (const name of ['first', 'second', 'third', 'fourth'])
        assigned.push((await runtime.assignTask('worker', { taskName: name })).id);
      await eventually(async () =>
        expect((await runtime!.tasks('worker')).map((task) => task.status)).toEqual([
          'completed',
          'failed',
          'in_progress',
          'assigned',
          'assigned',
          'assigned',
        ]),
      );

      // Four live tasks, twice the count: the two ended ones go, not one live task.
      await vi.advanceTimersByTimeAsync(60_000);
      await eventually(() => expect(retentionLines(logger)).toHaveLength(2));
      expect(retentionLines(logger)[1]!.object).toMatchObject({ tasks: 2 });
      expect((await runtime.tasks('worker')).map((task) => task.id)).toEqual(assigned);

      release();
      await runtime.whenIdle('worker');
      expect((await runtime.tasks('worker')).map((task) => task.status)).toEqual(Array(4).fill('completed'));
      await vi.advanceTimersByTimeAsync(60_000);
      await eventually(() => expect(retentionLines(logger)).toHaveLength(3));
      expect((await runtime.tasks('worker')).map((task) => task.id)).toEqual(assigned.slice(2));
    } finally {
      release();
    }
  });

  it('deletes the ended tasks in ranges of batchRows, each from where the last ended', async () => {
    const { db, statements } = recording(getDb());
    await seedTasks(getDb(), 'busy', [
      'assigned',
      ...ended(4),
      'in_progress',
      ...ended(6),
      'completed',
      'completed',
    ]);
    await seedTasks(getDb(), 'other', ended(2));
    const retention = createAgentRetention({
      db,
      stateHistoryRows: 0,
      conversationRows: 0,
      taskRows: 2,
      batchRows: 3,
    });

    expect(await retention.prune()).toEqual({ stateHistory: 0, conversations: 0, tasks: 10 });
    expect(await taskIds(getDb(), 'busy')).toEqual(['busy-00', 'busy-05', 'busy-12', 'busy-13']);
    expect(await taskIds(getDb(), 'other')).toEqual(['other-00', 'other-01']);
    // 3 + 3 + 3 + 1: the last range ends at the newest task past the count, busy-11.
    const batches = deletesFrom(statements, 'agent_tasks');
    expect(batches.map((batch) => batch.params)).toEqual([
      ['busy', Number.MIN_SAFE_INTEGER, '', 1_003, 'busy-03'],
      ['busy', 1_003, 'busy-03', 1_007, 'busy-07'],
      ['busy', 1_007, 'busy-07', 1_010, 'busy-10'],
      ['busy', 1_010, 'busy-10', 1_011, 'busy-11'],
    ]);
  });

  it('reads and deletes tasks through the index by agent', async () => {
    const { db, statements } = recording(getDb());
    await seedTasks(getDb(), 'a', ended(3));
    await seedTasks(getDb(), 'b', ['assigned', ...ended(5)]);
    await createAgentRetention({
      db,
      stateHistoryRows: 0,
      conversationRows: 0,
      taskRows: 3,
      batchRows: 2,
    }).prune();
    expect(await taskIds(getDb(), 'b')).toEqual(['b-00', 'b-03', 'b-04', 'b-05']);
    const shapes = new Map(statements.map((statement) => [statement.sql, statement]));
    expect(shapes.size).toBe(4);
    for (const statement of shapes.values()) {
      const plan = await planOf(getDb(), statement, inIndexOrder);
      if (getDb().dialect === 'sqlite') {
        expect(plan).toMatch(/USING (COVERING )?INDEX agent_tasks_by_agent/);
        expect(plan).not.toMatch(/(^|\| )SCAN |TEMP B-TREE/);
      } else {
        expect(plan).toMatch(/Index (Only )?Scan (Backward )?(using|on) agent_tasks_by_agent/);
        expect(plan).not.toMatch(/Seq Scan|Sort/);
      }
    }
    // The reader reads its newest tasks in the index's order, with no sort of their own.
    const reader = {
      sql: 'SELECT id, agent_id, task_name, status, result, created_at, completed_at FROM agent_tasks WHERE agent_id = ? ORDER BY created_at DESC, id DESC LIMIT ?',
      params: ['b', 1_000],
    };
    expect(await planOf(getDb(), reader, inIndexOrder)).toMatch(/agent_tasks_by_agent/);
    expect(await planOf(getDb(), reader, inIndexOrder)).not.toMatch(/TEMP B-TREE|Sort/);
  });
});
