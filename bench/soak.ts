// Soak: mixed load against a real `agentd serve` child for a long time. Every sample the server collects
// garbage twice and reports its JS heap used and RSS (the probe in bench/memory-probe.ts); the heap's slope
// after warm-up, per hour and per operation, is the leak figure. Not part of CI or `npm run bench` (it runs
// for an hour by default):
//   npx tsx bench/soak.ts [--minutes 60] [--sample-seconds 10] [--out bench/results/soak]
//                         [--ops-per-minute 3500] [--heap-snapshots <dir> [--snapshot-at 180,780]]
// --heap-snapshots writes a V8 heap snapshot of the server, after its forced collections, at the end of warm-up
// (or at each of the --snapshot-at seconds) and another after the load; bench/heap-diff.ts compares two.
// --ops-per-minute paces the clients (0, the default: as fast as they go, which slows as the sessions fill).
// Load: chat turns on several sessions (offline local model), work items for the worker pool, history and
// memory queries, health, and now and then a session reset. Loopback only, bounded concurrency.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { connectGateway, type GatewayClient } from '../src/cli/gateway-client.js';
import { startProbedServer } from './memory-probe.js';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..');

function option(name: string, fallback: number): number;
function option(name: string, fallback: string): string;
function option(name: string, fallback: number | string): number | string {
  const index = process.argv.indexOf(`--${name}`);
  if (index < 0 || index + 1 >= process.argv.length) return fallback;
  const value = process.argv[index + 1]!;
  return typeof fallback === 'number' ? Number(value) : value;
}

const minutes = option('minutes', 60);
const sampleSeconds = option('sample-seconds', 10);
const out = option('out', join(repoRoot, 'bench', 'results', 'soak'));
const snapshotDir = option('heap-snapshots', '');
const snapshotAt = option('snapshot-at', '');
const opsPerMinute = option('ops-per-minute', 0);
const sessions = 6;
const concurrency = 4;
// A chat turn whose final event never comes must not hold the run past its end.
const chatFinalTimeoutMs = 60_000;
const mb = 2 ** 20;

interface Sample {
  seconds: number;
  /** Operations completed (all kinds, errors included) when the sample was taken. */
  operations: number;
  /** JS heap used right after two forced collections. */
  heapUsedMb: number;
  /** Resident set 1.5 s after those collections. */
  rssMb: number;
}

/** Least-squares slope of y over x. */
function slope(points: Array<[number, number]>): number {
  const n = points.length;
  if (n < 2) return Number.NaN;
  const meanX = points.reduce((sum, [x]) => sum + x, 0) / n;
  const meanY = points.reduce((sum, [, y]) => sum + y, 0) / n;
  let numerator = 0;
  let denominator = 0;
  for (const [x, y] of points) {
    numerator += (x - meanX) * (y - meanY);
    denominator += (x - meanX) ** 2;
  }
  return numerator / denominator;
}

function range(values: number[]) {
  return { first: values[0]!, last: values.at(-1)!, max: Math.max(...values) };
}

async function main() {
  const home = mkdtempSync(join(tmpdir(), 'agentd-soak-'));
  writeFileSync(join(home, 'agentd.yaml'), 'memory:\n  maxActiveEntries: 24\n');
  if (snapshotDir) mkdirSync(snapshotDir, { recursive: true });
  const server = await startProbedServer({
    entry: ['--import', 'tsx', 'src/cli/bin.ts'],
    cwd: repoRoot,
    env: { ...process.env, AGENTD_HOME: home, AGENTD_LOG_LEVEL: 'error', AGENTD_MODEL: '', DATABASE_URL: '' },
  });
  const client: GatewayClient = await connectGateway({ url: server.websocket, token: server.token });
  const counts: Record<string, number> = { chat: 0, work: 0, history: 0, query: 0, health: 0, reset: 0 };
  const errors: Record<string, number> = {};
  const loadAverage = { start: loadavg(), end: [] as number[] };
  const startedAt = Date.now();
  const endAt = startedAt + minutes * 60_000;
  const warmupSeconds = (minutes * 60) / 5;
  const samples: Sample[] = [];
  const snapshots: string[] = [];
  const pendingSnapshots = snapshotAt
    ? snapshotAt
        .split(',')
        .map(Number)
        .sort((a, b) => a - b)
    : [warmupSeconds];
  // Pacing: each operation claims the next start slot; the clients stay at most `concurrency` in flight.
  const slotMs = opsPerMinute > 0 ? 60_000 / opsPerMinute : 0;
  let nextSlot = Date.now();
  let completed = 0;
  let sequence = 0;

  const take = async (snapshotName?: string): Promise<Sample> => {
    const snapshot = snapshotName && snapshotDir ? resolve(snapshotDir, snapshotName) : undefined;
    const operations = completed;
    const reading = await server.read({ gc: true, ...(snapshot ? { snapshot } : {}) });
    if (snapshot) snapshots.push(snapshot);
    return {
      seconds: Math.round((Date.now() - startedAt) / 1000),
      operations,
      heapUsedMb: reading.heapUsedAfterGc! / mb,
      rssMb: reading.usage.rss / mb,
    };
  };

  const chatTurn = async (sessionKey: string) => {
    const runId = `soak-${sequence}`;
    let off = () => {};
    let timer: NodeJS.Timeout | undefined;
    const done = new Promise<void>((resolveDone, rejectDone) => {
      off = client.onEvent((event, payload) => {
        if (
          event === 'chat' &&
          payload?.runId === runId &&
          ['final', 'error', 'aborted'].includes(payload.state)
        )
          resolveDone();
      });
      timer = setTimeout(
        () => rejectDone(Object.assign(new Error('no final chat event'), { code: 'CHAT_FINAL_TIMEOUT' })),
        chatFinalTimeoutMs,
      );
    });
    try {
      await client.call('chat.send', {
        sessionKey,
        message: `soak message ${sequence}: the deploy is on day ${sequence % 7}.`,
        idempotencyKey: runId,
      });
      await done;
    } finally {
      off();
      clearTimeout(timer);
    }
  };

  const one = async (worker: number) => {
    const roll = (sequence++ * 7919 + worker) % 100;
    const sessionKey = `agent:main:soak-${sequence % sessions}`;
    if (roll < 45) {
      await chatTurn(sessionKey);
      counts.chat!++;
    } else if (roll < 60) {
      await client.call('work.submit', {
        kind: 'task',
        agentId: 'main',
        description: `soak item ${sequence}`,
      });
      counts.work!++;
    } else if (roll < 75) {
      await client.call('chat.history', { sessionKey, limit: 50 });
      counts.history!++;
    } else if (roll < 90) {
      await client.call('memory.query', { sessionKey, topic: 'deploy' });
      counts.query!++;
    } else if (roll < 99) {
      await client.call('health', {});
      counts.health!++;
    } else {
      await client.call('sessions.reset', { key: sessionKey });
      counts.reset!++;
    }
  };

  const sampling = (async () => {
    samples.push(await take());
    // A slot missed while a reading or a snapshot took long is skipped, not caught up in a burst.
    for (let next = startedAt + sampleSeconds * 1000; next < endAt; next += sampleSeconds * 1000) {
      if (next < Date.now()) continue;
      await new Promise((resolveWait) => setTimeout(resolveWait, next - Date.now()));
      const elapsedSeconds = (next - startedAt) / 1000;
      const due = pendingSnapshots.length > 0 && elapsedSeconds >= pendingSnapshots[0]!;
      if (due) pendingSnapshots.shift();
      const name = snapshotAt ? `at-${Math.round(elapsedSeconds)}s` : 'after-warmup';
      const sample = await take(due ? `${name}.heapsnapshot` : undefined);
      samples.push(sample);
      process.stderr.write(
        `soak t=${sample.seconds}s heap=${sample.heapUsedMb.toFixed(1)} MB rss=${sample.rssMb.toFixed(1)} MB ops=${JSON.stringify(counts)}\n`,
      );
    }
  })();

  await Promise.all([
    sampling,
    ...Array.from({ length: concurrency }, async (_, worker) => {
      while (Date.now() < endAt) {
        if (slotMs > 0) {
          const slot = Math.max(nextSlot, Date.now());
          nextSlot = slot + slotMs;
          if (slot >= endAt) break;
          await new Promise((resolveWait) => setTimeout(resolveWait, slot - Date.now()));
        }
        try {
          await one(worker);
        } catch (error) {
          const code = (error as { code?: string }).code ?? 'ERROR';
          errors[code] = (errors[code] ?? 0) + 1;
        }
        completed++;
      }
    }),
  ]);
  // Load over: the same reading on a quiet server (no request in flight), and the second snapshot.
  const afterLoad = await take('after-load.heapsnapshot');
  loadAverage.end = loadavg();
  await client.close();
  await server.stop();
  rmSync(home, { recursive: true, force: true });

  // The first fifth is warm-up (JIT, caches, SQLite page cache); the slopes after it are the figures.
  const warm = samples.filter((sample) => sample.seconds >= warmupSeconds);
  const heapBytesPerOperation = slope(warm.map((sample) => [sample.operations, sample.heapUsedMb * mb]));
  const result = {
    label: `${minutes}-minute run`,
    minutes,
    sampleSeconds,
    warmupSeconds,
    opsPerMinute,
    machine: { cpus: cpus().length, node: process.version },
    loadAverage,
    operations: counts,
    errors,
    heapUsedMb: range(samples.map((sample) => sample.heapUsedMb)),
    rssMb: range(samples.map((sample) => sample.rssMb)),
    heapSlope: {
      mbPerHourAfterWarmup: slope(warm.map((sample) => [sample.seconds / 3600, sample.heapUsedMb])),
      bytesPerOperationAfterWarmup: heapBytesPerOperation,
      warmSamples: warm.length,
    },
    rssSlopeMbPerHour: {
      all: slope(samples.map((sample) => [sample.seconds / 3600, sample.rssMb])),
      afterWarmup: slope(warm.map((sample) => [sample.seconds / 3600, sample.rssMb])),
    },
    afterLoad,
    snapshots,
    samples,
  };
  writeFileSync(`${out}.json`, `${JSON.stringify(result, null, 2)}\n`);
  const fixed = (value: number, digits = 1) => value.toFixed(digits);
  const triple = ({ first, last, max }: { first: number; last: number; max: number }) =>
    `${fixed(first)} / ${fixed(last)} / ${fixed(max)}`;
  const lines = [
    `# Soak (${result.label})`,
    '',
    `Mixed load against one \`agentd serve\` child (SQLite, offline local model, run through tsx) for ${minutes}`,
    `minutes on ${result.machine.cpus} cores, ${concurrency} concurrent clients' worth of requests: chat turns on ${sessions} sessions,`,
    'work items, history and memory queries, health, occasional session resets. Every',
    `${sampleSeconds} s the server (a probe preloaded into it, bench/memory-probe.ts) runs a forced gc twice and`,
    'reads its JS heap used at once, then its RSS 1.5 s later. The forced collections are part of the load',
    'the server sees. Slopes are least squares over the samples after the first fifth of the run (warm-up).',
    `Run: \`npx tsx bench/soak.ts --minutes ${minutes}${opsPerMinute > 0 ? ` --ops-per-minute ${opsPerMinute}` : ''}\`${opsPerMinute > 0 ? ` (operations paced to at most ${opsPerMinute} a minute)` : ''}. Load average (1/5/15 min) at start`,
    `${loadAverage.start.map((value) => fixed(value, 2)).join(' ')}, at end ${loadAverage.end.map((value) => fixed(value, 2)).join(' ')}.`,
    '',
    '| figure | value |',
    '|---|---|',
    ...Object.entries(counts).map(([name, count]) => `| ${name} operations | ${count} |`),
    `| errors | ${JSON.stringify(errors)} |`,
    `| JS heap used after gc, first / last / max (MB) | ${triple(result.heapUsedMb)} |`,
    `| JS heap slope after warm-up (MB/h) | ${fixed(result.heapSlope.mbPerHourAfterWarmup, 2)} |`,
    `| JS heap slope after warm-up (bytes per operation) | ${fixed(heapBytesPerOperation, 1)} |`,
    `| RSS first / last / max (MB) | ${triple(result.rssMb)} |`,
    `| RSS slope, whole run (MB/h) | ${fixed(result.rssSlopeMbPerHour.all)} |`,
    `| RSS slope after warm-up (MB/h) | ${fixed(result.rssSlopeMbPerHour.afterWarmup)} |`,
    `| after the load, quiet: JS heap / RSS (MB) | ${fixed(afterLoad.heapUsedMb)} / ${fixed(afterLoad.rssMb)} |`,
    '',
    // Only a shortened run needs the caveat; the default hour is the run the slope is meant to judge.
    ...(minutes < 60
      ? [
          `This is a ${result.label}, not the hour-long soak the script defaults to: a slow leak below the`,
          "samples' noise over these minutes would still show in the hour.",
          '',
        ]
      : []),
    ...(snapshots.length > 0
      ? [
          `Heap snapshots were written (${snapshots.join(', ')}); writing one stalls the server for seconds and`,
          'raises its RSS for good, so the RSS figures of this run are not comparable with a run without them.',
          '',
        ]
      : []),
    '| s | operations | JS heap after gc (MB) | RSS (MB) |',
    '|---|---|---|---|',
    ...samples.map(
      (sample) =>
        `| ${sample.seconds} | ${sample.operations} | ${fixed(sample.heapUsedMb, 2)} | ${fixed(sample.rssMb)} |`,
    ),
    '',
  ];
  writeFileSync(`${out}.md`, lines.join('\n'));
  process.stdout.write(`${lines.join('\n')}\n`);
}

await main();
