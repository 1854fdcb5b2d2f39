// The command line's start-up: how long `agentd --version`, `--help`, the commands that talk to a running
// gateway and `send` without one (a runtime in the command's process, on SQLite) take from spawn to exit,
// with their peak RSS, `serve` until its gateway listens and a served process's first chat turn; beside `node -e 0` (the floor: Node's own
// start) and the real OpenClaw CLI's `--version` and `--help` (scripts/install-openclaw.sh; left out when it
// is not installed). Every command runs once per round, the rounds interleave the contenders, and each figure is the
// median over the rounds. AGENTD_BENCH_CLI_BEFORE=<checkout> adds the same agentd commands from another
// build (its dist/ built), for a before/after in the same run.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { findOpenClaw } from '../test/helpers/openclaw.js';
import { openChatClient, sendChatTurn } from './chat-client.js';
import { assertRuntimeBuilt, serveRuntime } from './runtime-server.js';
import { scriptedModelId, serveScriptedModel } from './scripted-model-server.js';
import { median } from './stats.js';

const rounds = Number(process.env.AGENTD_BENCH_CLI_ROUNDS ?? 10);
/** A person's pause between the server's start and their first message, for the first-turn rows. */
const firstTurnPauseMs = 1000;
const token = 'bench-token';
const gnuTime = '/usr/bin/time';

interface Contender {
  name: string;
  command: string;
  argv: string[];
  env?: Record<string, string>;
  /** For a command that keeps running (`serve`): timed to the first output matching this, then stopped. */
  ready?: RegExp;
  /**
   * For `serve`: timed from its first chat turn's `chat.send` to the final event instead, sent by a client that
   * connects this long after the gateway printed its address.
   */
  firstTurnAfterMs?: number;
}

interface Sample {
  wallMs: number;
  rssMiB: number | undefined;
  status: number | null;
}

/**
 * Runs one command to its end; peak RSS from GNU time where the machine has it. Asynchronous: the gateway the
 * commands talk to runs in this process, so the event loop must keep turning while they run.
 */
async function runOnce(contender: Contender, scratch: string): Promise<Sample> {
  if (contender.firstTurnAfterMs !== undefined) return runFirstTurn(contender, contender.firstTurnAfterMs);
  if (contender.ready) return runUntilReady(contender, contender.ready);
  const env = { ...process.env, ...contender.env };
  const withTime = existsSync(gnuTime);
  const timeFile = join(scratch, 'time');
  const [file, args] = withTime
    ? [gnuTime, ['-f', '%M', '-o', timeFile, contender.command, ...contender.argv]]
    : [contender.command, contender.argv];
  const started = performance.now();
  const child = spawn(file, args, { env, stdio: 'ignore' });
  const killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  const status = await new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  clearTimeout(killer);
  const wallMs = performance.now() - started;
  const rssKiB = withTime ? Number(readFileSync(timeFile, 'utf8').trim().split('\n').at(-1)) : Number.NaN;
  return { wallMs, rssMiB: Number.isFinite(rssKiB) ? rssKiB / 1024 : undefined, status };
}

/**
 * Spawns a command that keeps running and waits (up to 60 s) for its output to match `pattern`: the match
 * (undefined if it exited or never printed it), the time from spawn to it, and `stop` (SIGTERM, then its exit).
 */
async function startUntilOutput(contender: Contender, pattern: RegExp) {
  const started = performance.now();
  const child = spawn(contender.command, contender.argv, {
    env: { ...process.env, ...contender.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  let output = '';
  const match = await new Promise<RegExpExecArray | undefined>((resolve) => {
    const killer = setTimeout(() => resolve(undefined), 60_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString('utf8');
      const found = pattern.exec(output);
      if (!found) return;
      clearTimeout(killer);
      resolve(found);
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', () => {
      clearTimeout(killer);
      resolve(undefined);
    });
  });
  const elapsedMs = performance.now() - started;
  return {
    match,
    elapsedMs,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/** Spawn to the first output matching `ready`, then SIGTERM; no RSS (GNU time would not pass the signal on). */
async function runUntilReady(contender: Contender, ready: RegExp): Promise<Sample> {
  const { match, elapsedMs, stop } = await startUntilOutput(contender, ready);
  await stop();
  return { wallMs: match ? elapsedMs : Number.NaN, rssMiB: undefined, status: match ? 0 : null };
}

/** `serve` until it prints its address, a pause, a client, then one chat turn timed from send to final. */
async function runFirstTurn(contender: Contender, pauseMs: number): Promise<Sample> {
  const { match, stop } = await startUntilOutput(contender, /listening on http(:\/\/\S+)/);
  try {
    if (!match) return { wallMs: Number.NaN, rssMiB: undefined, status: null };
    await new Promise((resolve) => setTimeout(resolve, pauseMs));
    const client = await openChatClient(`ws${match[1]}`, 'first', token);
    const latencyMs = await new Promise<number | undefined>((resolve) => {
      const killer = setTimeout(() => resolve(undefined), 60_000);
      sendChatTurn(client, (ms) => {
        clearTimeout(killer);
        resolve(ms);
      });
    });
    client.ws.terminate();
    return { wallMs: latencyMs ?? Number.NaN, rssMiB: undefined, status: latencyMs === undefined ? null : 0 };
  } finally {
    await stop();
  }
}

function agentdContenders(
  label: string,
  root: string,
  url: string,
  scratch: string,
  modelUrl: string,
): Contender[] {
  const bin = join(root, 'bin', 'agentd.js');
  const env = { AGENTD_TOKEN: token, AGENTD_LOG_LEVEL: 'error' };
  // Each build its own state directory: the warm-up pass creates and migrates its database.
  const home = join(scratch, `${label.replace(/\W+/g, '-')}-home`);
  const openAICompatible = {
    ...env,
    AGENTD_MODEL: `openai/${scriptedModelId}`,
    OPENAI_BASE_URL: modelUrl,
    OPENAI_API_KEY: 'bench-key',
  };
  const firstTurns = [
    ['local model', env],
    ['OpenAI-compatible', openAICompatible],
  ] as const;
  return [
    { name: `${label} --version`, command: process.execPath, argv: [bin, '--version'], env },
    { name: `${label} --help`, command: process.execPath, argv: [bin, '--help'], env },
    {
      name: `${label} send --url`,
      command: process.execPath,
      argv: [bin, 'send', 'hello', '--url', url, '--session', 'agent:main:cli-bench'],
      env,
    },
    {
      name: `${label} serve, until ready`,
      command: process.execPath,
      argv: [bin, '--home', home, 'serve', '--port', '0'],
      env,
      ready: /dashboard:/,
    },
    ...firstTurns.flatMap(([model, modelEnv]) =>
      [0, firstTurnPauseMs].map(
        (pauseMs): Contender => ({
          name: `${label} serve, first turn ${pauseMs === 0 ? 'at once' : `${pauseMs / 1000} s after ready`} (${model})`,
          command: process.execPath,
          argv: [bin, '--home', home, 'serve', '--port', '0'],
          env: modelEnv,
          firstTurnAfterMs: pauseMs,
        }),
      ),
    ),
    {
      name: `${label} send (in-process)`,
      command: process.execPath,
      argv: [bin, '--home', home, 'send', 'hello', '--session', 'agent:main:cli-bench'],
      env,
    },
    { name: `${label} status --url`, command: process.execPath, argv: [bin, 'status', '--url', url], env },
    {
      name: `${label} work list --url`,
      command: process.execPath,
      argv: [bin, 'work', 'list', '--url', url],
      env,
    },
  ];
}

export default {
  name: 'cli-startup',
  description:
    "the command line's start-up: agentd --version, --help, gateway commands and an in-process send from spawn to exit, beside node -e 0 and the OpenClaw CLI",
  async run() {
    assertRuntimeBuilt();
    const root = fileURLToPath(new URL('..', import.meta.url));
    const before = process.env.AGENTD_BENCH_CLI_BEFORE;
    const scratch = mkdtempSync(join(tmpdir(), 'agentd-bench-cli-'));
    const load = loadavg().map((value) => value.toFixed(1));
    const server = await serveRuntime({ token });
    const url = `ws://127.0.0.1:${server.port}`;
    const model = await serveScriptedModel();
    const modelUrl = `http://127.0.0.1:${(model.server.address() as AddressInfo).port}/v1`;
    const contenders: Contender[] = [
      { name: 'node -e 0 (floor)', command: process.execPath, argv: ['-e', '0'] },
      ...agentdContenders('agentd', root, url, scratch, modelUrl),
      ...(before ? agentdContenders('agentd before', before, url, scratch, modelUrl) : []),
    ];
    const openclaw = findOpenClaw();
    if (openclaw.bin) {
      const ocHome = join(scratch, 'openclaw');
      const env = { HOME: ocHome, OPENCLAW_STATE_DIR: join(ocHome, '.openclaw') };
      contenders.push(
        { name: 'openclaw --version', command: openclaw.bin, argv: ['--version'], env },
        { name: 'openclaw --help', command: openclaw.bin, argv: ['--help'], env },
      );
    }
    const samples = new Map<string, Sample[]>(contenders.map((contender) => [contender.name, []]));
    try {
      // One warm-up pass fills the file system's cache for every contender alike.
      for (const contender of contenders) await runOnce(contender, scratch);
      for (let round = 0; round < rounds; round++) {
        const order = round % 2 === 0 ? contenders : [...contenders].reverse();
        for (const contender of order) samples.get(contender.name)!.push(await runOnce(contender, scratch));
      }
    } finally {
      await server.stop();
      model.server.close();
      rmSync(scratch, { recursive: true, force: true });
    }
    const floorMs = median(samples.get('node -e 0 (floor)')!.map((sample) => sample.wallMs));
    const rows = contenders.map((contender) => {
      const runs = samples.get(contender.name)!;
      const walls = runs.map((sample) => sample.wallMs);
      const rss = runs.map((sample) => sample.rssMiB).filter((value): value is number => value !== undefined);
      const failed = runs.filter((sample) => sample.status !== 0).length;
      return {
        command: contender.name,
        'median ms': Number(median(walls).toFixed(0)),
        'min ms': Number(Math.min(...walls).toFixed(0)),
        'max ms': Number(Math.max(...walls).toFixed(0)),
        // A first turn's time starts long after the process did: no ratio to Node's start.
        '× node -e 0':
          contender.firstTurnAfterMs === undefined ? Number((median(walls) / floorMs).toFixed(2)) : '',
        'peak RSS MiB': rss.length > 0 ? Number(median(rss).toFixed(0)) : '',
        'non-zero exits': failed,
      };
    });
    return {
      rows,
      notes: [
        `${rounds} rounds after one warm-up pass; each round runs every command once, in the order reversed every other round; figures are medians over the rounds (wall time from spawn to exit, peak RSS from GNU time's %M). \`serve, until ready\` is timed from spawn to its \`dashboard:\` line (the gateway listening), on the state directory \`send (in-process)\` uses, then stopped; no RSS for it.`,
        `\`serve, first turn\` rows: \`serve\` on the same state directory, a client (OpenClaw protocol) that connects at once or ${firstTurnPauseMs / 1000} s after the address line, and its first \`chat.send\` timed to the run's final event; with the offline local model, then with the OpenAI-compatible provider on a scripted model server in this process (one short reply streamed as SSE).`,
        "The gateway commands talk to agentd's whole runtime (SQLite, the offline local model) served from this process on a free loopback port; `send` waits for the reply. `send (in-process)` makes the runtime in its own process (SQLite in a state directory of its own, the local model), answers and closes it.",
        openclaw.bin
          ? `OpenClaw: ${openclaw.bin} (scripts/install-openclaw.sh, its own Node 24), with an empty state directory; only --version and --help, which need no gateway.`
          : `No OpenClaw rows: ${openclaw.reason}.`,
        before
          ? `"agentd before": the build in ${before} (its dist/).`
          : "Set AGENTD_BENCH_CLI_BEFORE=<checkout> to add another build's commands.",
        `Machine load average when the benchmark started: ${load.join(' / ')} (1 / 5 / 15 min) on 2 cores shared with other work.`,
      ],
    };
  },
};
