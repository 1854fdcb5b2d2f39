// Soak: mixed load against a real `agentd serve` child for a long time, its RSS sampled, the slope reported.
// Not part of CI or `npm run bench` (it runs for an hour by default):
//   npx tsx bench/soak.ts [--minutes 60] [--sample-seconds 10] [--out bench/results/soak]
// Load: chat turns on several sessions (offline local model), work items for the worker pool, history and
// memory queries, health, and now and then a session reset. Loopback only, bounded concurrency.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { connectGateway, type GatewayClient } from '../src/cli/gateway-client.js';

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
const sessions = 6;
const concurrency = 4;

function serve(home: string): Promise<{ child: ChildProcess; url: string; token: string }> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'src/cli/bin.ts', 'serve', '--port', '0', '--json'],
    {
      cwd: repoRoot,
      env: {
        ...process.env,
        AGENTD_HOME: home,
        AGENTD_LOG_LEVEL: 'error',
        AGENTD_MODEL: '',
        DATABASE_URL: '',
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  return new Promise((resolve, reject) => {
    let output = '';
    child.stdout!.on('data', (chunk) => {
      output += String(chunk);
      try {
        const started = JSON.parse(output) as { websocket: string; token: string };
        resolve({ child, url: started.websocket, token: started.token });
      } catch {
        // Not the whole start-up line yet.
      }
    });
    child.once('exit', (code) => reject(new Error(`agentd serve exited with ${code}`)));
  });
}

function rssBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const match = /VmRSS:\s+(\d+) kB/.exec(status);
  return match ? Number(match[1]) * 1024 : Number.NaN;
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

async function main() {
  const home = mkdtempSync(join(tmpdir(), 'agentd-soak-'));
  writeFileSync(join(home, 'agentd.yaml'), 'memory:\n  maxActiveEntries: 24\n');
  const server = await serve(home);
  const pid = server.child.pid!;
  const client: GatewayClient = await connectGateway({ url: server.url, token: server.token });
  const counts: Record<string, number> = { chat: 0, work: 0, history: 0, query: 0, health: 0, reset: 0 };
  const errors: Record<string, number> = {};
  const startedAt = Date.now();
  const endAt = startedAt + minutes * 60_000;
  const samples: Array<{ seconds: number; rssMb: number }> = [];
  let sequence = 0;

  const one = async (worker: number) => {
    const roll = (sequence++ * 7919 + worker) % 100;
    const sessionKey = `agent:main:soak-${sequence % sessions}`;
    if (roll < 45) {
      const runId = `soak-${sequence}`;
      const done = new Promise<void>((resolve) => {
        const off = client.onEvent((event, payload) => {
          if (
            event === 'chat' &&
            payload?.runId === runId &&
            ['final', 'error', 'aborted'].includes(payload.state)
          ) {
            off();
            resolve();
          }
        });
      });
      await client.call('chat.send', {
        sessionKey,
        message: `soak message ${sequence}: the deploy is on day ${sequence % 7}.`,
        idempotencyKey: runId,
      });
      await done;
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

  const sampler = setInterval(() => {
    const sample = {
      seconds: Math.round((Date.now() - startedAt) / 1000),
      rssMb: rssBytes(pid) / 1024 / 1024,
    };
    samples.push(sample);
    process.stderr.write(
      `soak t=${sample.seconds}s rss=${sample.rssMb.toFixed(1)} MB ops=${JSON.stringify(counts)}\n`,
    );
  }, sampleSeconds * 1000);
  samples.push({ seconds: 0, rssMb: rssBytes(pid) / 1024 / 1024 });

  await Promise.all(
    Array.from({ length: concurrency }, async (_, worker) => {
      while (Date.now() < endAt) {
        try {
          await one(worker);
        } catch (error) {
          const code = (error as { code?: string }).code ?? 'ERROR';
          errors[code] = (errors[code] ?? 0) + 1;
        }
      }
    }),
  );
  clearInterval(sampler);
  samples.push({ seconds: Math.round((Date.now() - startedAt) / 1000), rssMb: rssBytes(pid) / 1024 / 1024 });
  await client.close();
  server.child.kill('SIGTERM');
  await new Promise((resolve) => server.child.once('exit', resolve));

  const points = samples.map((sample) => [sample.seconds / 3600, sample.rssMb] as [number, number]);
  // The first fifth is warm-up (JIT, caches, SQLite page cache); the slope after it is the figure that matters.
  const warm = points.filter(([hours]) => hours >= points.at(-1)![0] / 5);
  const result = {
    label: `${minutes}-minute run`,
    minutes,
    sampleSeconds,
    machine: { cpus: cpus().length, node: process.version },
    operations: counts,
    errors,
    rssMb: {
      first: samples[0]!.rssMb,
      last: samples.at(-1)!.rssMb,
      max: Math.max(...samples.map((sample) => sample.rssMb)),
    },
    slopeMbPerHour: { all: slope(points), afterWarmup: slope(warm) },
    samples,
  };
  writeFileSync(`${out}.json`, `${JSON.stringify(result, null, 2)}\n`);
  const lines = [
    `# Soak (${result.label})`,
    '',
    `Mixed load against one \`agentd serve\` child (SQLite, offline local model) for ${minutes} minutes on`,
    `${result.machine.cpus} cores, ${concurrency} concurrent clients' worth of requests: chat turns on ${sessions} sessions,`,
    'work items, history and memory queries, health, occasional session resets. RSS of the server process',
    `sampled every ${sampleSeconds} s. Run: \`npx tsx bench/soak.ts --minutes ${minutes}\`.`,
    '',
    '| figure | value |',
    '|---|---|',
    ...Object.entries(counts).map(([name, count]) => `| ${name} operations | ${count} |`),
    `| errors | ${JSON.stringify(errors)} |`,
    `| RSS first / last / max (MB) | ${result.rssMb.first.toFixed(1)} / ${result.rssMb.last.toFixed(1)} / ${result.rssMb.max.toFixed(1)} |`,
    `| RSS slope, whole run (MB/h) | ${result.slopeMbPerHour.all.toFixed(1)} |`,
    `| RSS slope after the first fifth (MB/h) | ${result.slopeMbPerHour.afterWarmup.toFixed(1)} |`,
    '',
    // Only a shortened run needs the caveat; the default hour is the run the slope is meant to judge.
    ...(minutes < 60
      ? [
          `This is a ${result.label}, not the hour-long soak the script defaults to: a slope over a few minutes`,
          'mostly measures warm-up and allocator behaviour and says little about a slow leak.',
          '',
        ]
      : []),
  ];
  writeFileSync(`${out}.md`, lines.join('\n'));
  process.stdout.write(`${lines.join('\n')}\n`);
}

await main();
