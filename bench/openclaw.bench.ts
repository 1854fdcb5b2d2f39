// The real peer: the OpenClaw gateway (`openclaw gateway run`, the npm package installed by
// scripts/install-openclaw.sh with its own Node 24) beside agentd's whole runtime, with the same scripted
// OpenAI-compatible model server behind both, and a bare `ws` server sending agentd's frames (the floor).
// One chat turn = `chat.send` → the `chat` event with `state:"final"` for that run, over the OpenClaw
// protocol v4 (connect.challenge → connect with the token → chat.send), at 1 and 10 clients, interleaved.
//
// Every server is its own process (the model server too), so CPU and RSS are read per process tree from
// /proc the same way for each side; the clients share this process. Without the openclaw CLI (OPENCLAW_BIN,
// else ~/.cache/agentd-openclaw/bin/openclaw, or AGENTD_OPENCLAW_DIR) the OpenClaw rows are left out and a
// note says so. Loopback only: OpenClaw runs with a throwaway HOME / state dir and everything that would
// reach out (update check, model catalog refresh, Bonjour, channels, cron, heartbeat) switched off.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import {
  closeSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer as createNetServer } from 'node:net';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { findOpenClaw } from '../test/helpers/openclaw.js';
import { connectRequest } from './chat-client.js';
import { serveEcho } from './echo-floor.js';
import { assertRuntimeBuilt, forkRoleServer, runtimeSource, serveRuntime } from './runtime-server.js';
import { scriptedModelId as modelId, serveScriptedModel } from './scripted-model-server.js';
import { percentile } from './stats.js';

const clientCounts = [1, 10];
const warmupMs = 1000;
const phaseMs = Number(process.env.AGENTD_BENCH_PHASE_MS ?? 5000);
/** OpenClaw's turns take hundreds of ms: a longer phase for it, so its percentiles rest on more than ten turns. */
const peerPhaseMs = Number(process.env.AGENTD_BENCH_PEER_PHASE_MS ?? 10_000);
/** A turn not final after this counts as failed (OpenClaw's first turn prepares its workspace: ~20 s seen). */
const turnTimeoutMs = 60_000;
const gatewayStartTimeoutMs = 120_000;
const token = 'bench-token';
const role = process.env.AGENTD_OPENCLAW_BENCH_ROLE;

type ServerName = 'echo' | 'agentd' | 'openclaw';

// --- child roles: the scripted model, the echo floor, agentd ----------------------------------------------

if (role) {
  let stop: () => Promise<void> = async () => {};
  let port: number;
  let stats: { requests: number; requestBytes: number } | undefined;
  if (role === 'model') {
    const served = await serveScriptedModel();
    port = (served.server.address() as { port: number }).port;
    stats = served.stats;
    stop = () => new Promise((resolve) => served.server.close(() => resolve()));
    served.server.closeIdleConnections();
  } else if (role === 'echo') {
    port = await serveEcho(
      Number(process.env.AGENTD_BENCH_HELLO_BYTES),
      JSON.parse(process.env.AGENTD_BENCH_FRAME_BYTES ?? '[]'),
    );
  } else {
    // Only the fake model: no key from this environment may reach it or pick another provider.
    const served = await serveRuntime({
      token,
      env: { AGENTD_MODEL: `openai/${modelId}`, OPENAI_BASE_URL: process.env.AGENTD_BENCH_MODEL_URL! },
    });
    port = served.port;
    stop = served.stop;
  }
  process.on('message', (message: { type: string }) => {
    if (message.type === 'stats') process.send!({ type: 'stats', value: { ...stats } });
    if (message.type === 'stop') void stop().finally(() => process.exit(0));
  });
  process.send!({ type: 'ready', port });
}

// --- processes: start, measure from /proc, stop ---------------------------------------------------------

interface ProcStat {
  ppid: number;
  cpuTicks: number;
  rssBytes: number;
}

const pageBytes = 4096;
const ticksPerSecond = 100;

function readStat(pid: number): ProcStat | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name may hold spaces and parentheses; the fields after its last ')' are fixed.
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return {
      ppid: Number(fields[1]),
      cpuTicks: Number(fields[11]) + Number(fields[12]),
      rssBytes: Number(fields[21]) * pageBytes,
    };
  } catch {
    return undefined;
  }
}

/** `root` and every process below it (OpenClaw starts helpers of its own). */
function processTree(root: number): Map<number, ProcStat> {
  const all = new Map<number, ProcStat>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = readStat(Number(entry));
    if (stat) all.set(Number(entry), stat);
  }
  const tree = new Map<number, ProcStat>();
  const visit = (pid: number) => {
    const stat = all.get(pid);
    if (!stat || tree.has(pid)) return;
    tree.set(pid, stat);
    for (const [child, childStat] of all) if (childStat.ppid === pid) visit(child);
  };
  visit(root);
  return tree;
}

function treeUsage(root: number): {
  cpuUs: number;
  rssBytes: number;
  mainRssBytes: number;
  /** `comm` of each process in the tree. */
  processes: string[];
} {
  const tree = processTree(root);
  let cpuTicks = 0;
  let rssBytes = 0;
  for (const stat of tree.values()) {
    cpuTicks += stat.cpuTicks;
    rssBytes += stat.rssBytes;
  }
  return {
    cpuUs: (cpuTicks * 1_000_000) / ticksPerSecond,
    rssBytes,
    mainRssBytes: tree.get(root)?.rssBytes ?? 0,
    processes: [...tree.keys()].map((pid) => {
      try {
        return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
      } catch {
        return '?';
      }
    }),
  };
}

interface Target {
  name: ServerName;
  port: number;
  /** The process whose tree is measured (for OpenClaw the gateway's Node process, not the wrapper). */
  pid(): number;
  stop(): Promise<void>;
}

async function forkRole(
  name: 'model' | 'echo' | 'agentd',
  env: Record<string, string>,
): Promise<{ child: ChildProcess; port: number }> {
  return forkRoleServer({
    moduleUrl: import.meta.url,
    roleVariable: 'AGENTD_OPENCLAW_BENCH_ROLE',
    role: name,
    env,
  });
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const kill = setTimeout(() => child.kill('SIGKILL'), 10_000);
    child.once('exit', () => {
      clearTimeout(kill);
      resolve();
    });
    child.send({ type: 'stop' });
  });
}

function forkedTarget(name: 'echo' | 'agentd', started: { child: ChildProcess; port: number }): Target {
  return { name, port: started.port, pid: () => started.child.pid!, stop: () => stopChild(started.child) };
}

function modelStats(model: ChildProcess): Promise<{ requests: number; requestBytes: number }> {
  return new Promise((resolve) => {
    const onMessage = (message: { type: string; value: { requests: number; requestBytes: number } }) => {
      if (message.type !== 'stats') return;
      model.off('message', onMessage);
      resolve(message.value);
    };
    model.on('message', onMessage);
    model.send({ type: 'stats' });
  });
}

/** The Node the wrapper runs OpenClaw on (the wrapper is `exec "<node>" "<openclaw.mjs>" "$@"`). */
function openClawNodeVersion(bin: string): string {
  try {
    const node = /exec "([^"]+)"/.exec(readFileSync(bin, 'utf8'))?.[1];
    return node ? execFileSync(node, ['--version'], { encoding: 'utf8' }).trim() : 'unknown';
  } catch {
    return 'unknown';
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createNetServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** The config OpenClaw's docs give for an OpenAI-compatible local server, plus everything that would leave loopback off. */
function openClawConfig(stateDir: string, port: number, modelUrl: string) {
  return {
    gateway: { mode: 'local', port, bind: 'loopback', auth: { mode: 'token', token } },
    agents: {
      defaults: { model: { primary: `fake/${modelId}` }, heartbeat: { every: '0m' } },
    },
    models: {
      mode: 'merge',
      catalogRefresh: { enabled: false },
      providers: {
        fake: {
          baseUrl: modelUrl,
          apiKey: 'sk-local',
          api: 'openai-completions',
          models: [
            {
              id: modelId,
              name: 'Scripted model',
              reasoning: false,
              input: ['text'],
              cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
              contextWindow: 120_000,
              maxTokens: 8192,
            },
          ],
        },
      },
    },
    update: { checkOnStart: false },
    telemetry: { enabled: false },
    discovery: { mdns: { mode: 'off' } },
    logging: { file: join(stateDir, 'logs', 'openclaw.log') },
  };
}

async function startOpenClaw(
  bin: string,
  modelUrl: string,
): Promise<{ target: Target; version: () => string; logTail: () => string }> {
  const home = mkdtempSync(join(tmpdir(), 'agentd-openclaw-peer-'));
  const stateDir = join(home, '.openclaw');
  mkdirSync(join(stateDir, 'logs'), { recursive: true });
  mkdirSync(join(home, 'tmp'));
  const port = await freePort();
  const configPath = join(stateDir, 'openclaw.json');
  writeFileSync(configPath, JSON.stringify(openClawConfig(stateDir, port, modelUrl), null, 2));
  const logPath = join(home, 'gateway.out');
  const out = openSync(logPath, 'w');
  // Its own process group, so the wrapper, the gateway and whatever it spawns stop together.
  const child = spawn(bin, ['gateway', 'run'], {
    detached: true,
    stdio: ['ignore', out, out],
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: home,
      TMPDIR: join(home, 'tmp'),
      OPENCLAW_STATE_DIR: stateDir,
      OPENCLAW_CONFIG_PATH: configPath,
      OPENCLAW_DISABLE_BONJOUR: '1',
      OPENCLAW_NO_RESPAWN: '1',
      OPENCLAW_SKIP_CHANNELS: '1',
      OPENCLAW_SKIP_CRON: '1',
      OPENCLAW_NO_AUTO_UPDATE: '1',
      OPENCLAW_EXEC_SHELL_SNAPSHOT: '0',
      NO_COLOR: '1',
    },
  });
  closeSync(out);
  let exited = false;
  child.once('exit', () => {
    exited = true;
  });
  const logTail = () => {
    try {
      return readFileSync(logPath, 'utf8').split('\n').slice(-15).join('\n');
    } catch {
      return '';
    }
  };
  const stop = async () => {
    if (!exited) {
      const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      killGroup(child.pid!, 'SIGTERM');
      // Its shutdown drains runs for minutes by default; nothing is in flight here, so a short wait is enough.
      const timer = setTimeout(() => killGroup(child.pid!, 'SIGKILL'), 5000);
      await gone;
      clearTimeout(timer);
    }
    // Helpers that outlived the wrapper are still in the group.
    killGroup(child.pid!, 'SIGKILL');
    rmSync(home, { recursive: true, force: true });
  };
  let version = 'unknown';
  try {
    const deadline = Date.now() + gatewayStartTimeoutMs;
    for (;;) {
      if (exited) throw new Error(`openclaw gateway exited during start-up:\n${logTail()}`);
      try {
        const probe = await openClient(port, 'probe', 2000);
        version = probe.serverVersion;
        probe.ws.terminate();
        break;
      } catch (error) {
        if (Date.now() > deadline) {
          throw new Error(
            `openclaw gateway did not answer in ${gatewayStartTimeoutMs} ms (${String(error)}):\n${logTail()}`,
          );
        }
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
  } catch (error) {
    await stop();
    throw error;
  }
  // The wrapper execs Node, so the child's pid is the gateway's.
  return {
    target: { name: 'openclaw', port, pid: () => child.pid!, stop },
    version: () => version,
    logTail,
  };
}

function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // already gone
  }
}

// --- clients (this process) -----------------------------------------------------------------------------

interface Client {
  ws: WebSocket;
  name: string;
  turn: number;
  sessionKey: string;
  serverVersion: string;
  helloBytes: number;
  /** Bytes of each frame of the last turn (sizes the floor's frames). */
  frames: number[];
  onTurnEnd: ((error: string | undefined) => void) | undefined;
}

interface Frame {
  type: string;
  id?: string;
  ok?: boolean;
  event?: string;
  error?: { code?: string; message?: string };
  payload?: {
    type?: string;
    state?: string;
    runId?: string;
    errorMessage?: string;
    server?: { version?: string };
  };
}

function openClient(port: number, name: string, timeoutMs = 10_000): Promise<Client> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/`, { perMessageDeflate: false });
    const client: Client = {
      ws,
      name,
      turn: 0,
      sessionKey: `agent:main:${name}`,
      serverVersion: 'unknown',
      helloBytes: 0,
      frames: [],
      onTurnEnd: undefined,
    };
    let connected = false;
    const timer = setTimeout(() => {
      ws.terminate();
      reject(new Error(`no hello-ok from port ${port} within ${timeoutMs} ms`));
    }, timeoutMs);
    const fail = (error: Error) => {
      clearTimeout(timer);
      reject(error);
    };
    ws.once('error', fail);
    ws.once('close', () => {
      fail(new Error(`port ${port} closed the connection before hello-ok`));
      client.onTurnEnd?.('connection closed');
    });
    ws.on('message', (data: Buffer) => {
      const frame = JSON.parse(data.toString()) as Frame;
      if (!connected) {
        if (frame.event === 'connect.challenge') {
          ws.send(
            connectRequest(`c-${name}`, token, { id: 'cli', scopes: ['operator.read', 'operator.write'] }),
          );
        } else if (frame.type === 'res' && frame.id === `c-${name}`) {
          if (!frame.ok || frame.payload?.type !== 'hello-ok') {
            fail(new Error(`connect refused: ${JSON.stringify(frame.error)}`));
            return;
          }
          connected = true;
          clearTimeout(timer);
          client.helloBytes = data.length;
          client.serverVersion = frame.payload.server?.version ?? 'unknown';
          resolve(client);
        }
        return;
      }
      const runId = `${name}-${client.turn}`;
      if (frame.type === 'res' && frame.id === `t-${runId}` && !frame.ok) {
        client.onTurnEnd?.(`chat.send refused: ${frame.error?.code} ${frame.error?.message}`);
        return;
      }
      if (frame.type === 'res' || frame.payload?.runId === runId) client.frames.push(data.length);
      if (frame.event !== 'chat' || frame.payload?.runId !== runId) return;
      const state = frame.payload.state;
      if (state === 'final') client.onTurnEnd?.(undefined);
      else if (state === 'error' || state === 'aborted') {
        client.onTurnEnd?.(`chat ${state}: ${frame.payload.errorMessage ?? ''}`);
      }
    });
  });
}

/** One turn: resolves with its latency, or with the reason it failed (refused, error event, timeout). */
function sendTurn(client: Client): Promise<{ latencyMs: number; error: string | undefined }> {
  client.turn++;
  client.frames = [];
  const runId = `${client.name}-${client.turn}`;
  const sentAt = performance.now();
  return new Promise((resolve) => {
    const timer = setTimeout(() => end(`no final within ${turnTimeoutMs} ms`), turnTimeoutMs);
    const end = (error: string | undefined) => {
      clearTimeout(timer);
      client.onTurnEnd = undefined;
      resolve({ latencyMs: performance.now() - sentAt, error });
    };
    client.onTurnEnd = end;
    client.ws.send(
      JSON.stringify({
        type: 'req',
        id: `t-${runId}`,
        method: 'chat.send',
        params: { sessionKey: client.sessionKey, message: `turn ${client.turn}`, idempotencyKey: runId },
      }),
    );
  });
}

/** Closed loop: every client keeps one turn in flight until `durationMs` has passed; the last ones finish. */
async function closedLoop(clients: Client[], durationMs: number) {
  const latencies: number[] = [];
  const errors: string[] = [];
  const started = performance.now();
  const deadline = started + durationMs;
  await Promise.all(
    clients.map(async (client) => {
      while (performance.now() < deadline) {
        const { latencyMs, error } = await sendTurn(client);
        if (error) errors.push(error);
        else latencies.push(latencyMs);
      }
    }),
  );
  return { latencies, errors, elapsedMs: performance.now() - started };
}

const round = (value: number, digits = 2) => Number(value.toFixed(digits));
const mib = (bytes: number) => round(bytes / 1024 / 1024, 1);

async function phase(target: Target, count: number, model: ChildProcess) {
  const clients = await Promise.all(
    Array.from({ length: count }, (_, index) => openClient(target.port, `c${count}-${index}`)),
  );
  const warm = await closedLoop(clients, warmupMs);
  const usageBefore = treeUsage(target.pid());
  const modelBefore = await modelStats(model);
  const result = await closedLoop(clients, target.name === 'openclaw' ? peerPhaseMs : phaseMs);
  const usageAfter = treeUsage(target.pid());
  const modelAfter = await modelStats(model);
  for (const client of clients) client.ws.terminate();
  const sorted = result.latencies.slice().sort((a, b) => a - b);
  const turns = sorted.length;
  const attempts = turns + result.errors.length;
  return {
    row: {
      server: target.name,
      clients: count,
      turns,
      failed: result.errors.length,
      'turns/s': round((turns * 1000) / result.elapsedMs, 1),
      'p50 ms': round(percentile(sorted, 50), 2),
      'p99 ms': round(percentile(sorted, 99), 2),
      'max ms': round(sorted[sorted.length - 1] ?? Number.NaN, 1),
      'server CPU ms/turn': round((usageAfter.cpuUs - usageBefore.cpuUs) / 1000 / Math.max(1, turns), 2),
      'model calls/turn': round((modelAfter.requests - modelBefore.requests) / Math.max(1, attempts), 2),
      'model request KiB/turn': round(
        (modelAfter.requestBytes - modelBefore.requestBytes) / 1024 / Math.max(1, attempts),
        1,
      ),
      'RSS MiB': mib(usageAfter.rssBytes),
      'main process RSS MiB': mib(usageAfter.mainRssBytes),
      processes: usageAfter.processes.length,
    },
    errors: [...warm.errors, ...result.errors],
    processNames: usageAfter.processes,
  };
}

export default {
  name: 'openclaw',
  description:
    'the real OpenClaw gateway beside agentd, the same scripted OpenAI-compatible model behind both, and a bare ws floor: chat.send → final at 1 and 10 clients (p50/p99, turns/s, server CPU, RSS)',
  async run() {
    assertRuntimeBuilt();
    const { bin, reason } = findOpenClaw();
    const stops: Array<() => Promise<void>> = [];
    const rows: Array<Record<string, string | number>> = [];
    const errors: string[] = [];
    const notes: string[] = [];
    let openClawProcesses: string[] = [];
    try {
      const model = await forkRole('model', {});
      stops.push(() => stopChild(model.child));
      const modelUrl = `http://127.0.0.1:${model.port}/v1`;
      const agentd = forkedTarget('agentd', await forkRole('agentd', { AGENTD_BENCH_MODEL_URL: modelUrl }));
      stops.push(agentd.stop);
      let openclaw: Awaited<ReturnType<typeof startOpenClaw>> | undefined;
      if (bin) {
        const starting = performance.now();
        openclaw = await startOpenClaw(bin, modelUrl);
        stops.push(openclaw.target.stop);
        notes.push(
          `OpenClaw ${openclaw.version()} (${bin}, Node ${openClawNodeVersion(bin)}): gateway answered its first connect ${round((performance.now() - starting) / 1000, 1)} s after spawn`,
        );
      } else {
        notes.push(`OpenClaw not measured: ${reason}`);
      }
      // One cold turn on each side (not timed): agentd's sizes the floor's frames; OpenClaw's first turn
      // prepares its workspace and is far slower than the rest.
      const probe = await openClient(agentd.port, 'cold');
      const agentdCold = await sendTurn(probe);
      if (agentdCold.error) throw new Error(`agentd cold turn failed: ${agentdCold.error}`);
      const frameBytes = probe.frames.slice();
      const helloBytes = probe.helloBytes;
      probe.ws.terminate();
      notes.push(`agentd ${probe.serverVersion}: cold first turn ${round(agentdCold.latencyMs, 1)} ms`);
      if (openclaw) {
        const cold = await openClient(openclaw.target.port, 'cold');
        const result = await sendTurn(cold);
        cold.ws.terminate();
        if (result.error) {
          throw new Error(`OpenClaw cold turn failed: ${result.error}\n${openclaw.logTail()}`);
        }
        notes.push(
          `OpenClaw: cold first turn ${round(result.latencyMs, 1)} ms (workspace, memory index, system prompt)`,
        );
      }
      const echo = forkedTarget(
        'echo',
        await forkRole('echo', {
          AGENTD_BENCH_HELLO_BYTES: String(helloBytes),
          AGENTD_BENCH_FRAME_BYTES: JSON.stringify(frameBytes),
        }),
      );
      stops.push(echo.stop);
      const targets = [echo, agentd, ...(openclaw ? [openclaw.target] : [])];
      for (const count of clientCounts) {
        for (const target of targets) {
          const measured = await phase(target, count, model.child);
          rows.push(measured.row);
          errors.push(...measured.errors.map((error) => `${target.name} ×${count}: ${error}`));
          if (target.name === 'openclaw') openClawProcesses = measured.processNames;
        }
      }
      const row = (server: ServerName, count: number) =>
        rows.find((r) => r.server === server && r.clients === count);
      for (const count of clientCounts) {
        const ours = row('agentd', count)!;
        const floor = row('echo', count)!;
        const peer = row('openclaw', count);
        const ratio = (column: string, over: Record<string, string | number>) =>
          round(Number(over[column]) / Number(ours[column]), 1);
        notes.push(
          `${count} client(s): agentd p50 ×${round(Number(ours['p50 ms']) / Number(floor['p50 ms']), 1)} the floor` +
            (peer
              ? `; OpenClaw ÷ agentd: p50 ×${ratio('p50 ms', peer)}, p99 ×${ratio('p99 ms', peer)}, CPU/turn ×${ratio('server CPU ms/turn', peer)}, RSS ×${ratio('RSS MiB', peer)}; agentd ÷ OpenClaw turns/s ×${round(Number(ours['turns/s']) / Number(peer['turns/s']), 1)}`
              : ''),
        );
      }
      notes.push(
        `server cores busy (turns/s × CPU/turn): ${rows
          .filter((r) => r.server !== 'echo')
          .map(
            (r) =>
              `${r.server} ×${r.clients} ${round((Number(r['turns/s']) * Number(r['server CPU ms/turn'])) / 1000, 2)}`,
          )
          .join(', ')}; a Node server saturates near 1 core, so beyond that more clients only queue`,
        'each side does its own work per turn (system prompt, tools offered, history, memory): the model request KiB/turn column is what each sent to the same model for the same one-line message',
        `frames per agentd turn: ${frameBytes.length} (${frameBytes.join(', ')} bytes); the floor ("echo", a bare ws server) sends the same sizes`,
        `failed turns: ${errors.length === 0 ? 'none' : `${errors.length}, first: ${errors[0]}`}`,
        ...(openClawProcesses.length > 0
          ? [
              `OpenClaw's process tree: ${openClawProcesses.join(', ')} (RSS MiB sums them; main process RSS is the gateway alone)`,
            ]
          : []),
      );
    } finally {
      for (const stop of stops.reverse()) await stop().catch(() => {});
    }
    notes.push(
      `closed loop: each client keeps one turn in flight on its own session (agent:main:<client>) for ${phaseMs} ms (OpenClaw: ${peerPhaseMs} ms) after ${warmupMs} ms of warm-up, turns in flight at the end finish and count; client counts interleaved across servers (echo, agentd, openclaw)`,
      'the scripted model (its own process, shared by both): POST /v1/chat/completions → SSE: role chunk, "Hello from the ", "scripted model.", finish, usage, [DONE]; no delay',
      `agentd: createRuntime (SQLite, memory, identity, engage loop) with AGENTD_MODEL=openai/${modelId} and OPENAI_BASE_URL=<the scripted model>, ${runtimeSource}; its first turn prepared once the gateway listens, as \`agentd serve\` does`,
      ...(bin
        ? [
            `OpenClaw: \`openclaw gateway run\` with a throwaway HOME and OPENCLAW_STATE_DIR; config: gateway {mode local, bind loopback, token auth}, models.providers.fake {baseUrl <the scripted model>, api openai-completions, apiKey sk-local, model ${modelId}}, agents.defaults.model.primary fake/${modelId}; off: heartbeat (every 0m), models.catalogRefresh, update.checkOnStart, telemetry, mDNS; env OPENCLAW_SKIP_CHANNELS=1 OPENCLAW_SKIP_CRON=1 OPENCLAW_DISABLE_BONJOUR=1 OPENCLAW_NO_RESPAWN=1 OPENCLAW_NO_AUTO_UPDATE=1; everything else (tools, memory plugin, system prompt) as shipped`,
          ]
        : []),
      "server CPU ms/turn: user+system CPU of the server process tree during the measured phase (/proc, 10 ms ticks) ÷ turns; RSS MiB: the tree's resident memory after the phase (/proc, no forced gc, same for every side); model calls and request KiB per turn: what reached the scripted model",
      `machine: ${cpus().length} cores shared with other work; load average at the end ${loadavg()
        .map((value) => value.toFixed(1))
        .join(' / ')}`,
    );
    return { rows, notes };
  },
};
