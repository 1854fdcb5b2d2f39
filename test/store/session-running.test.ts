import { afterEach, expect, it } from 'vitest';
import {
  createKvStore,
  createSessionStore,
  migrate,
  type SqlDatabase,
  type UnrepliedRun,
} from '../../src/store/index.js';
import { describeEachDatabase, openTestDatabase } from '../helpers/databases.js';
import { migrationsUpTo } from '../helpers/migrations.js';

describeEachDatabase('a chat run in progress, marked on its session row (migration 0023)', (getDb) => {
  const opened: SqlDatabase[] = [];
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((db) => db.close()));
  });

  it('lists what is marked, and clears only the run it is told, on the key archived or not', async () => {
    const sessions = createSessionStore(getDb());
    const main = await sessions.ensureActive('agent:alpha:main', 'alpha');
    const ops = await sessions.ensureActive('agent:alpha:ops', 'alpha');
    await sessions.markRunning(main.id, { runId: 'run-1', startedAt: 10 });
    await sessions.markRunning(ops.id, { runId: 'run-2', startedAt: 20 });
    const byRun = async () =>
      (await sessions.listRunning()).sort((left, right) => left.startedAt - right.startedAt);
    expect(await byRun()).toEqual([
      { runId: 'run-1', sessionKey: 'agent:alpha:main', agentId: 'alpha', startedAt: 10 },
      { runId: 'run-2', sessionKey: 'agent:alpha:ops', agentId: 'alpha', startedAt: 20 },
    ]);
    // Another run's end, or another key's, leaves the mark.
    await sessions.markEnded('agent:alpha:main', 'run-0');
    await sessions.markEnded('agent:alpha:ops', 'run-1');
    expect((await byRun()).map((run) => run.runId)).toEqual(['run-1', 'run-2']);
    // `/new` archived the instance while its run went on: the run's end still clears it.
    await sessions.archive('agent:alpha:main', 'reset');
    await sessions.ensureActive('agent:alpha:main', 'alpha');
    await sessions.markEnded('agent:alpha:main', 'run-1');
    expect((await byRun()).map((run) => run.runId)).toEqual(['run-2']);
    // The message count and the mark live on one row and do not disturb each other.
    await sessions.touch(ops.id, { messageDelta: 2 });
    expect((await byRun()).map((run) => run.runId)).toEqual(['run-2']);
    expect((await sessions.getById(ops.id))?.messageCount).toBe(2);
  });

  it("counts a turn's messages in the statement that marks its run or its end", async () => {
    let now = 1_000;
    const sessions = createSessionStore(getDb(), { clock: { now: () => now }, activityResolutionMs: 1_000 });
    const main = await sessions.ensureActive('agent:alpha:main', 'alpha');
    const ops = await sessions.ensureActive('agent:alpha:ops', 'alpha');
    await sessions.markRunning(main.id, { runId: 'run-1', startedAt: 1_500 }, { messageDelta: 1, at: 1_500 });
    expect(await sessions.getById(main.id)).toMatchObject({ messageCount: 1, lastActiveAt: 1_500 });
    expect((await sessions.listRunning()).map((run) => run.runId)).toEqual(['run-1']);
    // Within the activity resolution the count moves and the activity does not: its indexes stay unwritten.
    now = 1_700;
    await sessions.markEnded('agent:alpha:main', 'run-0', { sessionId: main.id, messageDelta: 2, at: 1_700 });
    expect(await sessions.getById(main.id)).toMatchObject({ messageCount: 3, lastActiveAt: 1_500 });
    // Another run's end counted its messages and left this run's mark, start time included.
    expect(await sessions.listRunning()).toEqual([
      { runId: 'run-1', sessionKey: 'agent:alpha:main', agentId: 'alpha', startedAt: 1_500 },
    ]);
    // Its own end clears the mark and, past the resolution, moves the activity.
    await sessions.markEnded('agent:alpha:main', 'run-1', { sessionId: main.id, messageDelta: 1, at: 2_600 });
    expect(await sessions.getById(main.id)).toMatchObject({ messageCount: 4, lastActiveAt: 2_600 });
    expect(await sessions.listRunning()).toEqual([]);
    // The key must match the instance: another key's end touches nothing.
    await sessions.markEnded('agent:alpha:ops', 'run-1', { sessionId: main.id, messageDelta: 5, at: 9_000 });
    expect(await sessions.getById(main.id)).toMatchObject({ messageCount: 4, lastActiveAt: 2_600 });
    expect((await sessions.getById(ops.id))?.messageCount).toBe(0);
  });

  it('keeps the runs an older version left marked in kv, on their key’s newest session', async () => {
    const db = await openTestDatabase(getDb().dialect, { migrate: false });
    opened.push(db);
    await migrate(db, { dir: migrationsUpTo(22) });
    const older = createSessionStore(db);
    const archived = await older.ensureActive('agent:alpha:main', 'alpha');
    await older.archive('agent:alpha:main', 'reset');
    const newest = await older.ensureActive('agent:alpha:main', 'alpha');
    await older.ensureActive('agent:alpha:idle', 'alpha');
    const kv = createKvStore(db);
    const marked = { runId: 'run-cut', sessionKey: 'agent:alpha:main', agentId: 'alpha', startedAt: 42 };
    await kv.set('chat-running', 'run-cut', JSON.stringify(marked));
    await kv.set('chat-inbox', 'run-waiting', '{"runId":"run-waiting"}');

    await migrate(db);
    const sessions = createSessionStore(db);
    expect(await sessions.listRunning()).toEqual([marked]);
    const row = await db.get<{ id: string }>('SELECT id FROM sessions WHERE running_run_id = ?', ['run-cut']);
    expect(row?.id).toBe(newest.id);
    expect(row?.id).not.toBe(archived.id);
    // The marks moved; the pending messages stayed where they were.
    expect(await kv.list('chat-running')).toEqual([]);
    expect((await kv.list('chat-inbox')).map((entry) => entry.key)).toEqual(['run-waiting']);
  });
});

describeEachDatabase('how a run without a reply ended, kept on its session row (migration 0048)', (getDb) => {
  const failed = { code: 'PROVIDER_ERROR', message: 'the provider said "no" — 503', retryable: true };
  /** Marks `run` running on the session row `id`, then ends it without a reply. */
  const endUnreplied = async (
    sessions: ReturnType<typeof createSessionStore>,
    id: string,
    run: UnrepliedRun,
  ) => {
    await sessions.markRunning(id, { runId: run.runId, startedAt: run.endedAt - 1 });
    await sessions.markEndedWithoutReply(run);
  };

  it('ends the run, keeps its status and error, and lists them by key', async () => {
    const sessions = createSessionStore(getDb());
    const main = await sessions.ensureActive('agent:alpha:main', 'alpha');
    const ops = await sessions.ensureActive('agent:alpha:ops', 'alpha');
    await endUnreplied(sessions, main.id, {
      runId: 'run-1',
      sessionKey: 'agent:alpha:main',
      status: 'error',
      error: failed,
      endedAt: 15,
    });
    await endUnreplied(sessions, ops.id, {
      runId: 'run-2',
      sessionKey: 'agent:alpha:ops',
      status: 'completed',
      endedAt: 25,
    });
    expect(await sessions.listRunning()).toEqual([]);
    const listed = (await sessions.listUnrepliedRuns()).sort((left, right) => left.endedAt - right.endedAt);
    expect(listed).toEqual([
      { runId: 'run-1', sessionKey: 'agent:alpha:main', status: 'error', error: failed, endedAt: 15 },
      { runId: 'run-2', sessionKey: 'agent:alpha:ops', status: 'completed', endedAt: 25 },
    ]);
  });

  it('writes nothing for a run no longer marked, keeps the last 4 runs of a row and 200 characters of an error', async () => {
    const sessions = createSessionStore(getDb());
    const main = await sessions.ensureActive('agent:alpha:main', 'alpha');
    // Not marked (another run is): nothing is kept, and the other mark stays.
    await sessions.markRunning(main.id, { runId: 'run-live', startedAt: 1 });
    await sessions.markEndedWithoutReply({
      runId: 'run-x',
      sessionKey: 'agent:alpha:main',
      status: 'error',
      endedAt: 2,
    });
    expect(await sessions.listUnrepliedRuns()).toEqual([]);
    expect((await sessions.listRunning()).map((run) => run.runId)).toEqual(['run-live']);
    // A provider's error may be long (a body quoted whole): the row keeps its start, and stays small.
    const long = { code: 'PROVIDER_ERROR', message: 'é'.repeat(5_000), retryable: false };
    for (let index = 0; index < 6; index++)
      await endUnreplied(sessions, main.id, {
        runId: `run-${index}`,
        sessionKey: 'agent:alpha:main',
        status: 'error',
        error: index === 5 ? long : failed,
        endedAt: index + 10,
      });
    const kept = await sessions.listUnrepliedRuns();
    expect(kept.map((run) => run.runId)).toEqual(['run-2', 'run-3', 'run-4', 'run-5']);
    expect(kept[3]!.error!.message).toBe(`${'é'.repeat(199)}…`);
    expect(kept[0]!.error).toEqual(failed);
    const row = await getDb().get<{ unreplied_runs: string }>(
      'SELECT unreplied_runs FROM sessions WHERE id = ?',
      [main.id],
    );
    expect(Buffer.byteLength(row!.unreplied_runs)).toBeLessThan(1_500);
  });

  it('reads a row it cannot decode as no runs, and starts that row again at the next run', async () => {
    const db = getDb();
    const sessions = createSessionStore(db);
    const main = await sessions.ensureActive('agent:alpha:main', 'alpha');
    const ops = await sessions.ensureActive('agent:alpha:ops', 'alpha');
    const idle = await sessions.ensureActive('agent:alpha:idle', 'alpha');
    await endUnreplied(sessions, ops.id, {
      runId: 'run-ok',
      sessionKey: 'agent:alpha:ops',
      status: 'aborted',
      endedAt: 2,
    });
    const set = (id: string, text: string) =>
      db.run('UPDATE sessions SET unreplied_runs = ? WHERE id = ?', [text, id]);
    await set(main.id, '{"v":1,"runs":[{"runId":7}]}');
    await set(idle.id, `{"v":1,"runs":[],"pad":"${'x'.repeat(300 * 1024)}"}`);
    expect(await sessions.listUnrepliedRuns()).toEqual([
      { runId: 'run-ok', sessionKey: 'agent:alpha:ops', status: 'aborted', endedAt: 2 },
    ]);
    await endUnreplied(sessions, main.id, {
      runId: 'run-next',
      sessionKey: 'agent:alpha:main',
      status: 'error',
      error: failed,
      endedAt: 4,
    });
    expect((await sessions.listUnrepliedRuns()).map((run) => run.runId).sort()).toEqual([
      'run-next',
      'run-ok',
    ]);
  });
});
