import type { SqlExecutor, SqlRunResult, SqlValue } from '../../store/index.js';
import { ErrorCodes, SystemError } from '../../util/index.js';
import type { FoldedStatement } from '../ltm-store.js';
import type { AlsoInTransaction } from './types.js';

type Answer = SqlRunResult | Record<string, unknown>[] | Record<string, unknown> | undefined;

interface RecordedStatement {
  kind: 'run' | 'all' | 'get';
  sql: string;
  params: ReadonlyArray<SqlValue>;
  resolve(answer: Answer): void;
  reject(error: unknown): void;
}

/** A plain INSERT, UPDATE or DELETE, and the table it changes. */
const dataModifying = /^\s*(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+([A-Za-z_][A-Za-z0-9_]*)\s/i;
/** What a folded statement may not contain: its own RETURNING, a second statement, the memory tables. */
const notFoldable = /\bRETURNING\b|;|\bmemory_/i;

/**
 * What a memory commit's `also` does, on Postgres: `also` runs once, against an executor that records its
 * statements instead of sending them, and the commit sends them with its own: folded into the entries'
 * INSERT where they allow it (`foldable`), else in its transaction (`replay`). Their answers reach `also`
 * only once the commit is stored (`settle`), so whatever `also` does with them comes after the commit, and
 * the transaction holds nothing but statements: its COMMIT can leave with them.
 */
export class RecordedAlso {
  readonly statements: RecordedStatement[] = [];
  /** `also`'s own promise. */
  readonly done: Promise<void>;
  /** Set when `done` rejected; one microtask after the call it tells a failure while `also` issued. */
  failure: { error: unknown } | undefined;
  private recording = true;

  constructor(also: AlsoInTransaction) {
    const executor: SqlExecutor = {
      dialect: 'postgres',
      run: (sql, params) => this.record('run', sql, params) as Promise<SqlRunResult>,
      all: <Row>(sql: string, params?: ReadonlyArray<SqlValue>) =>
        this.record('all', sql, params) as Promise<Row[]>,
      get: <Row>(sql: string, params?: ReadonlyArray<SqlValue>) =>
        this.record('get', sql, params) as Promise<Row | undefined>,
    };
    let done: Promise<void>;
    try {
      done = also(executor);
    } catch (error) {
      done = Promise.reject(error);
    }
    this.done = done;
    done.catch((error: unknown) => {
      this.failure ??= { error };
    });
  }

  private record(kind: RecordedStatement['kind'], sql: string, params: ReadonlyArray<SqlValue> = []) {
    if (!this.recording)
      return Promise.reject(
        new SystemError({
          code: ErrorCodes.internal,
          message:
            "a statement was issued after the memory commit's statements were sent: `also` must issue all of them before it awaits anything",
        }),
      );
    return new Promise<Answer>((resolve, reject) => {
      this.statements.push({ kind, sql, params, resolve, reject });
    });
  }

  /** Statements issued from now on are refused: the commit sends what it has. */
  stopRecording(): void {
    this.recording = false;
  }

  /**
   * The statements as CTEs of the entries' INSERT, or undefined when one does not allow it: each must be a
   * `run` of a plain INSERT, UPDATE or DELETE, no two on one table, none on the memory tables (a CTE sees the
   * database as the statement began, and two CTEs changing one row leave one change).
   */
  foldable(): ReadonlyArray<FoldedStatement> | undefined {
    const tables = new Set<string>();
    for (const statement of this.statements) {
      const table = statement.kind === 'run' ? dataModifying.exec(statement.sql)?.[1] : undefined;
      if (table === undefined || notFoldable.test(statement.sql)) return undefined;
      const name = table.toLowerCase();
      if (tables.has(name)) return undefined;
      tables.add(name);
    }
    return this.statements;
  }

  /** Sends the statements on `tx`, all at once; their answers, in order. `also` hears of them in `settle`. */
  replay(tx: SqlExecutor): Promise<Answer[]> {
    return Promise.all(
      this.statements.map((statement): Promise<Answer> => {
        if (statement.kind === 'run') return tx.run(statement.sql, statement.params);
        if (statement.kind === 'all') return tx.all<Record<string, unknown>>(statement.sql, statement.params);
        return tx.get<Record<string, unknown>>(statement.sql, statement.params);
      }),
    );
  }

  /** Hands each statement its answer, once the commit is stored. */
  settle(answers: ReadonlyArray<Answer>): void {
    for (const [index, statement] of this.statements.entries()) statement.resolve(answers[index]);
  }

  /** Fails each statement with the commit's failure: nothing of it is stored. */
  fail(error: unknown): void {
    for (const statement of this.statements) statement.reject(error);
  }
}
