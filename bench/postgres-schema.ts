// A fresh schema of a Postgres database for one benchmark server: its URL (with the schema as search_path),
// a VACUUM ANALYZE of its tables (the machine's Postgres may run without autovacuum) and its drop.
import pg from 'pg';

export interface BenchSchema {
  /** The schema's name, for a database opened with a `schema` option instead of the URL. */
  name: string;
  url: string;
  /** Postgres's `autovacuum` setting on the server, as `SHOW autovacuum` gives it. */
  autovacuum: string;
  /** `VACUUM ANALYZE` of every table in the schema. */
  vacuum(): Promise<void>;
  drop(): Promise<void>;
}

/** A new schema named from `prefix`, the process and the time; undefined when `databaseUrl` does not answer. */
export async function freshPostgresSchema(
  databaseUrl: string,
  prefix: string,
): Promise<BenchSchema | undefined> {
  const schema = `${prefix}_${process.pid}_${Date.now()}_${sequence++}`;
  const admin = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 1000 });
  try {
    await admin.connect();
    await admin.query(`CREATE SCHEMA ${schema}`);
  } catch {
    await admin.end().catch(() => {});
    return undefined;
  }
  const url = new URL(databaseUrl);
  url.searchParams.set('options', `-c search_path=${schema}`);
  const autovacuum = (await admin.query<{ autovacuum: string }>('SHOW autovacuum')).rows[0]!.autovacuum;
  return {
    name: schema,
    url: url.toString(),
    autovacuum,
    vacuum: async () => {
      const { rows } = await admin.query<{ name: string }>(
        "SELECT quote_ident(table_name) AS name FROM information_schema.tables WHERE table_schema = $1 AND table_type = 'BASE TABLE'",
        [schema],
      );
      if (rows.length === 0) return;
      await admin.query(`VACUUM (ANALYZE) ${rows.map((row) => `${schema}.${row.name}`).join(', ')}`);
    },
    drop: async () => {
      await admin.query(`DROP SCHEMA ${schema} CASCADE`).catch(() => {});
      await admin.end().catch(() => {});
    },
  };
}

/** Several schemas made in one millisecond still differ. */
let sequence = 0;
