// Durable queue: agentd's work queue (SQLite and Postgres, run by the worker pool) against graphile-worker
// and pg-boss on the same Postgres, in the same run. Two measurements per contender:
//  - drain: N no-op jobs enqueued first, then workers start; jobs/s from start to the last completion.
//  - latency: workers idle and waiting; jobs enqueued open-loop at a fixed rate; enqueue → handler start.
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Logger as GraphileLogger, makeWorkerUtils, run as runGraphile } from 'graphile-worker';
import pg from 'pg';
import { PgBoss } from 'pg-boss';
import { createWorkerPool } from '../src/agents/index.js';
import { createBus } from '../src/bus/index.js';
import {
  createPostgresDatabase,
  createSqliteDatabase,
  migrate,
  type SqlDatabase,
} from '../src/store/index.js';
import { silentLogger } from '../src/util/index.js';
import { createWorkQueue } from '../src/work/index.js';
import { percentile } from './stats.js';

/** Jobs per drain and latency samples per run; fewer (QUEUE_BENCH_SAMPLES) only for quick checks while iterating. */
const drainJobs = Number(process.env.QUEUE_BENCH_SAMPLES ?? 5_000);
const latencyJobs = drainJobs;
/**
 * Jobs per phase of the unrecorded warm-up every contender gets before each measurement, on the schema it
 * is then measured on: its JIT, pool connections and the Postgres backends' caches start warm for all alike.
 */
const warmupJobs = Number(process.env.QUEUE_BENCH_WARMUP ?? 500);
const latencyGapMs = 4;
const concurrency = 24;
/** Full repetitions (every contender, both phases); each is reported as its own rows. */
const rounds = Number(process.env.QUEUE_BENCH_ROUNDS ?? 3);
/** Comma-separated name prefixes (QUEUE_BENCH_ONLY="agentd (Postgres),graphile") to measure only those contenders. */
const only = process.env.QUEUE_BENCH_ONLY?.split(',').filter((prefix) => prefix.length > 0);
const adminUrl = 'postgres://postgres@127.0.0.1:5432/postgres';
const benchDatabase = 'agentd_bench';
const benchUrl = `postgres://postgres@127.0.0.1:5432/${benchDatabase}`;

interface Contender {
  name: string;
  /** Enqueue one job carrying `t0` (performance.now() at enqueue). */
  enqueue(t0: number): Promise<void>;
  /** Start workers; `onJob(t0)` must be called when a job's handler starts. */
  startWorkers(onJob: (t0: number) => void): Promise<void>;
  stopWorkers(): Promise<void>;
  close(): Promise<void>;
}

const round = (value: number, digits = 2) => Number(value.toFixed(digits));

async function waitFor(count: () => number, target: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (count() < target) {
    if (Date.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  return true;
}

/** N jobs enqueued first, then workers start: how long until the last one ran. */
async function drain(contender: Contender, jobs: number) {
  const enqueueStart = performance.now();
  for (let index = 0; index < jobs; index++) await contender.enqueue(performance.now());
  const enqueueMs = performance.now() - enqueueStart;
  let drained = 0;
  const drainStart = performance.now();
  await contender.startWorkers(() => {
    drained++;
  });
  const drainedAll = await waitFor(() => drained, jobs, 45_000);
  const drainMs = performance.now() - drainStart;
  await contender.stopWorkers();
  return { enqueueMs, drainMs, drainedAll, drained };
}

/** Idle workers, N jobs arriving open-loop: enqueue → handler start of each. */
async function latency(contender: Contender, jobs: number): Promise<number[]> {
  const latencies: number[] = [];
  const phaseStart = performance.now();
  // Jobs left over from a drain that timed out are not latency samples.
  await contender.startWorkers((t0) => {
    if (t0 >= phaseStart) latencies.push(performance.now() - t0);
  });
  await new Promise((resolve) => setTimeout(resolve, 300));
  for (let index = 0; index < jobs; index++) {
    await contender.enqueue(performance.now());
    await new Promise((resolve) => setTimeout(resolve, latencyGapMs));
  }
  await waitFor(() => latencies.length, jobs, 30_000);
  await contender.stopWorkers();
  return latencies;
}

async function measure(contender: Contender): Promise<Record<string, string | number>> {
  if (warmupJobs > 0) {
    await drain(contender, warmupJobs);
    await latency(contender, warmupJobs);
  }
  const { enqueueMs, drainMs, drainedAll, drained } = await drain(contender, drainJobs);
  const latencies = await latency(contender, latencyJobs);
  const sorted = [...latencies].sort((left, right) => left - right);
  return {
    contender: contender.name,
    'enqueue jobs/s (1 at a time)': Math.round(drainJobs / (enqueueMs / 1000)),
    'drain jobs/s': drainedAll
      ? Math.round(drainJobs / (drainMs / 1000))
      : `timeout (${drained}/${drainJobs})`,
    'latency p50 ms': round(percentile(sorted, 50)),
    'latency p99 ms': round(percentile(sorted, 99)),
    'latency max ms': round(sorted.at(-1) ?? Number.NaN),
    'latency jobs seen': latencies.length,
  };
}

function agentdContender(
  name: string,
  open: () => Promise<SqlDatabase>,
  listenConnectionString?: string,
): Contender {
  let db: SqlDatabase | undefined;
  let queue: ReturnType<typeof createWorkQueue> | undefined;
  let pool: ReturnType<typeof createWorkerPool> | undefined;
  const ready = async () => {
    if (!queue) {
      db = await open();
      await migrate(db);
      queue = createWorkQueue({
        db,
        bus: createBus(),
        logger: silentLogger,
        ...(listenConnectionString ? { listenConnectionString, notifyChannel: 'agentd_work_bench' } : {}),
      });
      await queue.whenListening();
    }
    return queue;
  };
  return {
    name,
    async enqueue(t0) {
      await (await ready()).submit({ kind: 'bench', params: { t0 } });
    },
    async startWorkers(onJob) {
      const workQueue = await ready();
      pool = createWorkerPool({
        queue: workQueue,
        bus: createBus(),
        concurrency,
        admissionQueueSize: 0,
        runItem: async (item) => {
          onJob(item.params.t0 as number);
          return null;
        },
      });
      pool.start();
    },
    async stopWorkers() {
      await pool?.stop();
    },
    async close() {
      await queue?.close();
      await db?.close();
    },
  };
}

function graphileContender(): Contender {
  const schema = 'graphile_worker_bench';
  let utils: Awaited<ReturnType<typeof makeWorkerUtils>> | undefined;
  let runner: Awaited<ReturnType<typeof runGraphile>> | undefined;
  const ready = async () => {
    utils ??= await makeWorkerUtils({ connectionString: benchUrl, schema });
    return utils;
  };
  return {
    name: 'graphile-worker 0.18 (Postgres)',
    async enqueue(t0) {
      await (await ready()).addJob('bench', { t0 });
    },
    async startWorkers(onJob) {
      await ready();
      runner = await runGraphile({
        connectionString: benchUrl,
        schema,
        concurrency,
        maxPoolSize: concurrency + 1,
        noHandleSignals: true,
        pollInterval: 2_000,
        logger: new GraphileLogger(() => () => undefined),
        taskList: {
          bench: async (payload) => {
            onJob((payload as { t0: number }).t0);
          },
        },
      });
    },
    async stopWorkers() {
      await runner?.stop();
    },
    async close() {
      await utils?.release();
    },
  };
}

function pgBossContender(): Contender {
  let boss: PgBoss | undefined;
  const ready = async () => {
    if (!boss) {
      boss = new PgBoss({
        connectionString: benchUrl,
        schema: 'pgboss_bench',
        max: concurrency + 1,
        useListenNotify: true,
      });
      boss.on('error', () => undefined);
      boss.on('warning', () => undefined);
      await boss.start();
      await boss.createQueue('bench', { notify: true });
    }
    return boss;
  };
  return {
    name: 'pg-boss 12 (Postgres, LISTEN/NOTIFY)',
    async enqueue(t0) {
      await (await ready()).send('bench', { t0 });
    },
    async startWorkers(onJob) {
      const instance = await ready();
      // pg-boss goes wide by batches: four workers fetching up to 50 jobs each, fetching again at once while
      // a fetch comes back full (without that a worker waits out its polling interval after every batch).
      await instance.work<{ t0: number }>(
        'bench',
        {
          localConcurrency: 4,
          batchSize: 50,
          burstWhenBatchFull: true,
          pollingIntervalSeconds: 0.5,
          notifyPollingIntervalSeconds: 0.5,
        },
        async (jobs) => {
          for (const job of jobs) onJob(job.data.t0);
        },
      );
    },
    async stopWorkers() {
      await boss?.offWork('bench', { wait: true });
    },
    async close() {
      await boss?.stop({ graceful: false });
    },
  };
}

async function resetPostgres(): Promise<boolean> {
  const admin = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 2_000 });
  try {
    await admin.connect();
  } catch {
    return false;
  }
  try {
    const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [benchDatabase]);
    if (exists.rowCount === 0) await admin.query(`CREATE DATABASE ${benchDatabase}`);
  } finally {
    await admin.end();
  }
  const bench = new pg.Client({ connectionString: benchUrl });
  await bench.connect();
  try {
    for (const schema of ['agentd_queue_bench', 'graphile_worker_bench', 'pgboss_bench']) {
      await bench.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    }
    await bench.query('CREATE SCHEMA agentd_queue_bench');
  } finally {
    await bench.end();
  }
  return true;
}

export default {
  name: 'queue',
  description:
    'work queue enqueue → claim → complete: agentd (SQLite, Postgres) vs graphile-worker and pg-boss on the same Postgres',
  async run() {
    const rows: Array<Record<string, string | number>> = [];
    const notes: string[] = [
      `drain: ${drainJobs} no-op jobs enqueued one at a time (that rate is the "enqueue" column), then workers with concurrency ${concurrency} start; jobs/s until the last handler ran.`,
      `latency: idle workers; ${latencyJobs} jobs enqueued open-loop every ${latencyGapMs} ms; time from before the enqueue call to the handler start (performance.now, same process).`,
      'agentd runs jobs through its worker pool: a batched claim-and-start (SKIP LOCKED on Postgres, through a PL/pgSQL function whose plan is pinned to the ready index) and batched completions (the completions of one event-loop turn share a statement, and jobs finishing while one is in flight share the next; each keeps its own lease guard). On Postgres the completion statement also claims as many ready jobs for the same worker (claim-ahead, work.claimAhead, on by default), so the slots it frees are refilled without a claim statement: one statement and one commit per completed batch. A job submitted while a worker of the same process waits for work is inserted already started under that worker’s lease and handed to it without a claim statement (hand-off, work.handOffToIdle, on by default; SQLite and Postgres): in the latency phase every job is. Wake-ups by LISTEN/NOTIFY on a dedicated connection; an idle worker re-reads the next backoff/lease deadline only when something may have moved it.',
      `graphile-worker: run() with concurrency ${concurrency}, maxPoolSize ${concurrency + 1}, default LISTEN/NOTIFY; jobs added with workerUtils.addJob.`,
      'pg-boss 12: useListenNotify with a notify queue; work() with 4 local workers fetching up to 50 jobs each, burstWhenBatchFull, polling every 0.5 s as the backstop; jobs added with send().',
      `warm-up: before each measurement every contender drains ${warmupJobs} jobs and runs ${warmupJobs} latency jobs, unrecorded, on the schema it is then measured on (QUEUE_BENCH_WARMUP).`,
      `${rounds} runs, each measuring every contender in turn on freshly created schemas, each run starting with the next contender (rotated order). All on one 2-core machine shared with other work; Postgres 15 on 127.0.0.1; graphile-worker 0.18 and pg-boss 12 declare Node >= 22 and ran here on Node ${process.versions.node}.`,
    ];
    const postgres = await resetPostgres();
    if (!postgres) notes.push('Postgres at 127.0.0.1:5432 was not reachable: only SQLite was measured.');
    for (let round = 1; round <= rounds; round++) {
      const dir = mkdtempSync(join(tmpdir(), 'agentd-queue-bench-'));
      const contenders: Contender[] = [
        agentdContender('agentd (SQLite file, WAL)', async () =>
          createSqliteDatabase({ path: join(dir, 'bench.db') }),
        ),
      ];
      if (postgres) {
        contenders.push(
          agentdContender(
            'agentd (Postgres)',
            async () =>
              createPostgresDatabase({
                connectionString: benchUrl,
                schema: 'agentd_queue_bench',
                poolSize: concurrency + 1,
              }),
            benchUrl,
          ),
          graphileContender(),
          pgBossContender(),
        );
      }
      // Each run starts with a different contender: measured in a fixed order, the first one would always
      // get the machine while its load (from other work) was different from the others'.
      const shift = (round - 1) % contenders.length;
      const order = [...contenders.slice(shift), ...contenders.slice(0, shift)];
      const measured: Array<Record<string, string | number>> = [];
      try {
        for (const contender of order) {
          if (only && !only.some((prefix) => contender.name.startsWith(prefix))) {
            await contender.close();
            continue;
          }
          try {
            measured.push({ run: round, ...(await measure(contender)) });
          } finally {
            await contender.close();
          }
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
        if (postgres) await resetPostgres();
      }
      rows.push(...measured);
      notes.push(
        `run ${round} order: ${measured.map((row) => row.contender).join(' → ')}; load average ${loadavg()
          .map((value) => value.toFixed(2))
          .join(', ')} at its end.`,
      );
      const agentd = measured.find((row) => row.contender === 'agentd (Postgres)');
      const graphile = measured.find((row) => String(row.contender).startsWith('graphile-worker'));
      if (agentd && graphile) {
        const ratio = (key: string) => Number(agentd[key]) / Number(graphile[key]);
        notes.push(
          `run ${round}: agentd on Postgres drains ${ratio('drain jobs/s').toFixed(2)}× graphile-worker's jobs/s; p99 start latency ${agentd['latency p99 ms']} ms vs ${graphile['latency p99 ms']} ms (${ratio('latency p99 ms').toFixed(2)}×), p50 ${agentd['latency p50 ms']} vs ${graphile['latency p50 ms']} ms.`,
        );
      }
    }
    return { rows, notes };
  },
};
