// Gateway: 1,000 concurrent OpenClaw-protocol WebSocket clients over loopback, each sending chat turns
// (chat.send → ack, agent lifecycle/assistant events, chat delta, chat final) to agentd's gateway backed by
// a chat service that replies at once (the role the `local` model plays), against a bare `ws` server that
// answers every turn with the same number of frames of the same sizes (the floor). Each server runs in its
// own child process so its event loop and RSS are its own; the clients run in this process.
import { fork } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { createBus } from '../src/bus/index.js';
import {
  type ChatRunResult,
  createMethodTable,
  type GatewayChatService,
  type GatewayServices,
  loadGatewayServer,
  registerCoreMethods,
} from '../src/gateway/index.js';
import { type ChatClient as Client, openChatClient, sendChatTurn as sendTurn } from './chat-client.js';
import { closedLoop, pacedLoop } from './chat-turn-driver.js';
import { serveEcho } from './echo-floor.js';
import { assertRuntimeBuilt, runtimeSource, serveRuntime } from './runtime-server.js';
import { percentile } from './stats.js';

const clientCount = 1000;
const connectBatch = 100;
/** Paced phase: every client sends one turn per `paceMs`, i.e. `clientCount * 1000 / paceMs` turns/s offered. */
const paceMs = 1000;
const pacedPhaseMs = 5000;
/** Saturated phase: every client sends its next turn as soon as the previous one ends. */
const saturatedPhaseMs = 5000;
const token = 'bench-token';
const role = process.env.AGENTD_GATEWAY_BENCH_ROLE;

// --- servers (child processes) --------------------------------------------------------------------------

function instantChat(bus: ReturnType<typeof createBus>): GatewayChatService {
  const results = new Map<string, ChatRunResult>();
  const waiters = new Map<string, (result: ChatRunResult) => void>();
  return {
    async send(input) {
      const runId = input.idempotencyKey;
      setImmediate(() => {
        const scope = { runId, sessionKey: input.sessionKey, agentId: input.agentId };
        const text = `ok: ${input.text}`;
        bus.publish(
          'run:started',
          { runId, sessionKey: input.sessionKey, agentId: input.agentId, model: 'local/echo' },
          scope,
        );
        bus.publish('run:text-delta', { runId, delta: text, text }, scope);
        bus.publish(
          'run:finished',
          { runId, status: 'completed', text, usage: { inputTokens: 4, outputTokens: 4 }, turns: 1 },
          scope,
        );
        const result: ChatRunResult = { runId, status: 'completed', text };
        const waiter = waiters.get(runId);
        if (waiter) {
          waiters.delete(runId);
          waiter(result);
        } else results.set(runId, result);
      });
      return { runId, status: 'started' };
    },
    wait(runId) {
      const done = results.get(runId);
      if (done) {
        results.delete(runId);
        return Promise.resolve(done);
      }
      return new Promise((resolve) => waiters.set(runId, resolve));
    },
    abort: async () => ({ aborted: false, runIds: [] }),
    inject: async () => ({ memoryId: '0' }),
    history: async ({ sessionKey }) => ({ sessionKey, sessionId: 's', messages: [] }),
  };
}

async function serveAgentd(): Promise<number> {
  const bus = createBus();
  const table = createMethodTable();
  const benchModel = { id: 'instant', provider: 'bench', contextWindow: 32_768, local: true };
  const services: GatewayServices = {
    chat: instantChat(bus),
    sessions: {
      list: async () => [],
      preview: async () => [],
      reset: async ({ sessionKey }) => ({ sessionKey, sessionId: 's', archived: false }),
      delete: async () => ({ deleted: false }),
      compact: async () => ({ compacted: false }),
      patch: async ({ sessionKey }) => ({
        key: sessionKey,
        sessionId: 's',
        agentId: 'main',
        createdAt: 0,
        updatedAt: 0,
        messageCount: 0,
      }),
      describe: async () => undefined,
      create: async ({ sessionKey, agentId }) => ({
        session: { key: sessionKey, sessionId: 's', agentId, createdAt: 0, updatedAt: 0, messageCount: 0 },
        created: true,
      }),
    },
    models: {
      list: () => [benchModel],
      forAgent: () => benchModel,
    },
    agents: { list: () => [{ id: 'main' }], workCounts: async () => undefined },
    memory: { query: async () => ({ items: [] }), recall: async () => ({ items: [] }) },
    health: { health: () => ({ ok: true }), status: () => ({ ok: true }) },
  };
  registerCoreMethods(table, services);
  const { createGatewayServer } = await loadGatewayServer();
  const server = createGatewayServer({
    host: '127.0.0.1',
    port: 0,
    token,
    limits: { maxConnections: clientCount + 100 },
    methodTable: table,
    bus,
    services,
    serverVersion: 'bench',
  });
  await server.listen();
  return server.address()!.port;
}

if (role) {
  const gc = (globalThis as { gc?: () => void }).gc;
  const rss = () => {
    gc?.();
    gc?.();
    return process.memoryUsage().rss;
  };
  const heap = () => {
    gc?.();
    return process.memoryUsage().heapUsed;
  };
  const port =
    role === 'agentd'
      ? await serveAgentd()
      : role === 'runtime'
        ? (await serveRuntime({ token })).port
        : await serveEcho(
            Number(process.env.AGENTD_BENCH_HELLO_BYTES),
            JSON.parse(process.env.AGENTD_BENCH_FRAME_BYTES ?? '[]'),
          );
  process.on('message', (message: { type: string }) => {
    if (message.type === 'rss') process.send!({ type: 'rss', rss: rss() });
    if (message.type === 'heap') process.send!({ type: 'heap', heap: heap() });
    if (message.type === 'cpu') {
      const usage = process.cpuUsage();
      process.send!({ type: 'cpu', cpuUs: usage.user + usage.system });
    }
    if (message.type === 'stop') process.exit(0);
  });
  process.send!({ type: 'ready', port, rss: rss(), heap: heap() });
}

// --- clients (this process) -----------------------------------------------------------------------------

interface Target {
  port: number;
  rss(): Promise<number>;
  /** Server process CPU time so far, in microseconds. */
  cpu(): Promise<number>;
  heap(): Promise<number>;
  baselineHeap: number;
  stop(): void;
  baselineRss: number;
}

async function startTarget(
  name: 'agentd' | 'runtime' | 'echo',
  env: Record<string, string> = {},
): Promise<Target> {
  const child = fork(fileURLToPath(import.meta.url), [], {
    execArgv: ['--import', 'tsx', '--expose-gc'],
    env: { ...process.env, AGENTD_GATEWAY_BENCH_ROLE: name, ...env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const ready = await new Promise<{ port: number; rss: number; heap: number }>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`${name} server exited with ${code}`)));
    child.on('message', (message: { type: string; port: number; rss: number; heap: number }) => {
      if (message.type === 'ready') resolve(message);
    });
  });
  const ask = (type: 'rss' | 'cpu' | 'heap') =>
    new Promise<number>((resolve) => {
      const onMessage = (message: { type: string; rss?: number; cpuUs?: number; heap?: number }) => {
        if (message.type !== type) return;
        child.off('message', onMessage);
        resolve((type === 'rss' ? message.rss : type === 'heap' ? message.heap : message.cpuUs) as number);
      };
      child.on('message', onMessage);
      child.send({ type });
    });
  return {
    port: ready.port,
    baselineRss: ready.rss,
    baselineHeap: ready.heap,
    rss: () => ask('rss'),
    heap: () => ask('heap'),
    cpu: () => ask('cpu'),
    stop: () => {
      child.removeAllListeners('exit');
      child.send({ type: 'stop' });
    },
  };
}

const round = (value: number, digits = 2) => Number(value.toFixed(digits));

/** Paced phase: the clients together offer `clientCount * 1000 / paceMs` turns/s, each on its own schedule. */
async function paced(clients: Client[]): Promise<{ latencies: number[]; turns: number; elapsedMs: number }> {
  const { latencies, elapsedMs } = await pacedLoop(clients, pacedPhaseMs, (clientCount * 1000) / paceMs);
  return { latencies, turns: latencies.length, elapsedMs };
}

/** Saturated phase: closed loop, every client keeps exactly one turn in flight. */
async function saturated(
  clients: Client[],
): Promise<{ latencies: number[]; turns: number; elapsedMs: number }> {
  const { latencies, elapsedMs } = await closedLoop(clients, saturatedPhaseMs);
  return { latencies, turns: latencies.length, elapsedMs };
}

async function measure(name: 'agentd' | 'runtime' | 'echo', target: Target) {
  const clients: Client[] = [];
  for (let start = 0; start < clientCount; start += connectBatch) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(connectBatch, clientCount - start) }, (_, offset) =>
        openChatClient(
          `ws://127.0.0.1:${target.port}/`,
          String(start + offset),
          token,
          `agent:main:bench-${start + offset}`,
        ),
      ),
    );
    clients.push(...batch);
  }
  const connectedRss = await target.rss();
  const connectedHeap = await target.heap();
  // Warm-up: one turn per client.
  await Promise.all(
    clients.map((client) => new Promise<void>((resolve) => sendTurn(client, () => resolve()))),
  );
  const frameBytes = clients[0]!.frames.slice();
  const withCpu = async (phase: (clients: Client[]) => ReturnType<typeof paced>) => {
    const before = await target.cpu();
    const result = await phase(clients);
    return { ...result, cpuUs: (await target.cpu()) - before };
  };
  const pacedResult = await withCpu(paced);
  const saturatedResult = await withCpu(saturated);
  for (const client of clients) client.ws.terminate();
  const rows = [
    { phase: `paced (${(clientCount * 1000) / paceMs} turns/s offered)`, result: pacedResult },
    { phase: 'saturated (closed loop)', result: saturatedResult },
  ].map(({ phase, result }) => {
    const sorted = result.latencies.slice().sort((a, b) => a - b);
    return {
      server: name,
      phase,
      clients: clientCount,
      turns: result.turns,
      'turns/s': Math.round((result.turns * 1000) / result.elapsedMs),
      'p50 ms': round(percentile(sorted, 50)),
      'p99 ms': round(percentile(sorted, 99)),
      'server CPU µs/turn': Math.round(result.cpuUs / result.turns),
      'RSS/conn KiB': round((connectedRss - target.baselineRss) / clientCount / 1024, 1),
      'heap/conn KiB': round((connectedHeap - target.baselineHeap) / clientCount / 1024, 1),
    };
  });
  return { rows, frameBytes, helloBytes: clients[0]!.helloBytes };
}

export default {
  name: 'gateway',
  description: `${clientCount} concurrent OpenClaw-protocol clients sending chat turns: agentd gateway vs a bare ws server sending the same frames`,
  async run() {
    assertRuntimeBuilt();
    const agentd = await startTarget('agentd');
    let agentdResult: Awaited<ReturnType<typeof measure>>;
    try {
      agentdResult = await measure('agentd', agentd);
    } finally {
      agentd.stop();
    }
    const fullStack = await startTarget('runtime');
    let runtimeResult: Awaited<ReturnType<typeof measure>>;
    try {
      runtimeResult = await measure('runtime', fullStack);
    } finally {
      fullStack.stop();
    }
    const echo = await startTarget('echo', {
      AGENTD_BENCH_HELLO_BYTES: String(agentdResult.helloBytes),
      AGENTD_BENCH_FRAME_BYTES: JSON.stringify(agentdResult.frameBytes),
    });
    let echoResult: Awaited<ReturnType<typeof measure>>;
    try {
      echoResult = await measure('echo', echo);
    } finally {
      echo.stop();
    }
    const [agentdPaced, agentdSaturated] = agentdResult.rows;
    const [echoPaced, echoSaturated] = echoResult.rows;
    const [runtimePaced, runtimeSaturated] = runtimeResult.rows;
    const ratio = (a: number, b: number) => round(a / b, 2);
    return {
      rows: [...agentdResult.rows, ...runtimeResult.rows, ...echoResult.rows],
      notes: [
        `frames per turn: ${agentdResult.frameBytes.length} (${agentdResult.frameBytes.join(', ')} bytes); the bare ws server sends the same sizes; agentd also pings after each chat.send answer and sends the run's events on the pong (one round trip, so a client reads the answer first)`,
        `gateway cost vs floor: server CPU per turn ×${ratio(agentdSaturated!['server CPU µs/turn'], echoSaturated!['server CPU µs/turn'])} (saturated), ×${ratio(agentdPaced!['server CPU µs/turn'], echoPaced!['server CPU µs/turn'])} (paced); paced p50 ×${ratio(agentdPaced!['p50 ms'], echoPaced!['p50 ms'])}, paced p99 ×${ratio(agentdPaced!['p99 ms'], echoPaced!['p99 ms'])}, saturated throughput ×${ratio(echoSaturated!['turns/s'], agentdSaturated!['turns/s'])} (floor turns/s ÷ agentd turns/s)`,
        `servers run in child processes (RSS/conn = server RSS after connecting all clients minus before, after gc, ÷ clients); clients share this process; the whole-runtime server runs ${runtimeSource}`,
        'server "agentd": the gateway with a chat service that replies instantly (one delta, then finished) — the protocol cost alone',
        `server "runtime": the whole stack (createRuntime: SQLite file, memory write-through of both messages, identity, engage loop, local model; ${runtimeResult.frameBytes.length} frames per turn); vs floor: server CPU per turn ×${ratio(runtimeSaturated!['server CPU µs/turn'], echoSaturated!['server CPU µs/turn'])} (saturated), paced p50 ×${ratio(runtimePaced!['p50 ms'], echoPaced!['p50 ms'])}, paced p99 ×${ratio(runtimePaced!['p99 ms'], echoPaced!['p99 ms'])}`,
        `machine: ${cpus().length} cores shared with other work; load average at the end ${loadavg()
          .map((value) => value.toFixed(1))
          .join(' / ')}`,
      ],
    };
  },
};
