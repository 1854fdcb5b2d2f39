import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach } from 'vitest';
import { createRuntime, loadConfig, type Runtime } from '../../src/index.js';
import type { SqlDatabase, SqlExecutor } from '../../src/store/index.js';
import { createScriptedModel } from '../../src/testing.js';
import type { Logger } from '../../src/util/index.js';
import { captureLog, tempHome } from '../runtime/helpers.js';
import { queryPlan, type RecordedStatement } from './query-plans.js';

/**
 * Scaffolding the retention tests share (the audit log's, the agents', the work queue's, the skills' and the
 * workflows' prunes, and the runtime's start of them).
 */

export const dayMs = 24 * 60 * 60 * 1000;

/**
 * A fixed instant for a manual clock, of today's order of magnitude: milliseconds since 1970 as a real clock
 * writes them, past a 32-bit integer, so a column too narrow for them fails as it would in use.
 */
export const now = 1_700_000_000_000 + 100 * dayMs;

/** `executor` with `before(sql, params)` called ahead of each statement: it notes it, or throws to refuse it. */
export function watched(
  executor: SqlExecutor,
  before: (sql: string, params: ReadonlyArray<unknown>) => void,
): SqlExecutor {
  return {
    dialect: executor.dialect,
    all: (sql, params) => {
      before(sql, params ?? []);
      return executor.all(sql, params);
    },
    get: (sql, params) => {
      before(sql, params ?? []);
      return executor.get(sql, params);
    },
    run: (sql, params) => {
      before(sql, params ?? []);
      return executor.run(sql, params);
    },
  };
}

/**
 * `db` with every statement noted (its SQL and parameters) before it runs, inside its transactions too: what
 * a prune sends, to count its batches and to plan them (`planOf`). `recordingReads` of query-plans.ts notes
 * reads only.
 */
export function recording(db: SqlDatabase): { db: SqlDatabase; statements: RecordedStatement[] } {
  const statements: RecordedStatement[] = [];
  const note = (sql: string, params: ReadonlyArray<unknown>) => {
    statements.push({ sql, params: [...params] });
  };
  return {
    statements,
    db: {
      ...db,
      ...watched(db, note),
      transaction: (work, options) => db.transaction((tx) => work(watched(tx, note)), options),
    },
  };
}

/** The recorded statements that delete. */
export const deletes = (statements: RecordedStatement[]) =>
  statements.filter((statement) => /^\s*DELETE\b/i.test(statement.sql));

export interface PlanOptions {
  /**
   * false: Postgres is told to avoid bitmap scans too, which a small table invites; a bitmap scan returns
   * rows out of the index's order, to be sorted. Default true.
   */
  bitmapScans?: boolean;
}

/**
 * How the database plans a recorded statement: SQLite's `EXPLAIN QUERY PLAN`, or Postgres's `EXPLAIN` with
 * sequential scans turned off. A table of a few rows is cheapest to scan, as a large one would not be: what
 * matters is that the statement can use the index at all.
 */
export async function planOf(
  db: SqlDatabase,
  statement: RecordedStatement,
  options: PlanOptions = {},
): Promise<string> {
  if (db.dialect === 'sqlite') return queryPlan(db, statement);
  return db.transaction(async (tx) => {
    await tx.run('SET LOCAL enable_seqscan = off');
    if (options.bitmapScans === false) await tx.run('SET LOCAL enable_bitmapscan = off');
    const rows = await tx.all<{ 'QUERY PLAN': string }>(
      `EXPLAIN ${statement.sql}`,
      statement.params as never,
    );
    return rows.map((row) => row['QUERY PLAN']).join(' | ');
  });
}

/**
 * Waits until `check` passes, polling between turns of the event loop: `vi.waitFor` would advance the fake
 * timers under test, and with them the retention's own.
 */
export async function eventually(check: () => Promise<void> | void): Promise<void> {
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

export interface LogLine {
  level: 'debug' | 'info' | 'warn' | 'error';
  object: Record<string, unknown>;
  message: string | undefined;
}

/**
 * A logger that keeps each line as it was logged. Unlike `createRecordingLogger`, its children are itself and
 * add no bindings: a line's object is what the retention logged, without the `component` its child logger
 * names.
 */
export function capturingLogger(): Logger & { lines: LogLine[] } {
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

/** A new home (a temporary directory) whose agentd.yaml is `yaml`. */
export function homeWithConfig(prefix: string, yaml: string): string {
  const home = tempHome(prefix);
  writeFileSync(join(home, 'agentd.yaml'), yaml);
  return home;
}

/** A runtime in `home`, configured by its agentd.yaml, with a model that is never called and its log kept. */
export async function runtimeIn(home: string): Promise<Runtime> {
  const env = { AGENTD_HOME: home };
  return createRuntime({
    config: loadConfig({ cwd: home, env }),
    env,
    model: createScriptedModel({ steps: [] }),
    logDestination: captureLog().stream,
  });
}

/**
 * The homes a test of the calling block makes (it pushes them on `homes`) and the runtimes it opens in them
 * with `openIn`: after each test the runtimes are closed (which waits for a prune that started), then the homes
 * removed.
 */
export function useRuntimeHomes(): { homes: string[]; openIn(home: string): Promise<Runtime> } {
  const homes: string[] = [];
  const open: Runtime[] = [];
  afterEach(async () => {
    for (const runtime of open.splice(0)) await runtime.close();
    for (const home of homes.splice(0)) rmSync(home, { recursive: true, force: true });
  });
  return {
    homes,
    async openIn(home) {
      const runtime = await runtimeIn(home);
      open.push(runtime);
      return runtime;
    },
  };
}
