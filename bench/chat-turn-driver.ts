// The client side of the chat-turn measurements, shared by bench/chat-turn.bench.ts and bench/chat-turn-ab.ts:
// a server role forked from a tree's chat-turn.bench.ts and asked over IPC for its CPU, RSS and profiles;
// closed and paced loops of OpenClaw-protocol clients; and 1-client rounds interleaved across servers.
import { spawn } from 'node:child_process';
import { type ChatClient, openChatClient, sendChatTurn } from './chat-client.js';
import { forkRoleServer } from './runtime-server.js';
import { median, percentile } from './stats.js';

export const benchToken = 'bench-token';

export interface Target {
  /** What the reports call this server: its role, or a tree for an A/B. */
  name: string;
  port: number;
  /** The server's process id, for tools that watch it from outside (strace, perf). */
  pid: number;
  rss(): Promise<number>;
  /** process.memoryUsage() after gc, once freed pages went back to the system. */
  memory(): Promise<NodeJS.MemoryUsage>;
  /** Server process CPU time so far, in microseconds. */
  cpu(): Promise<number>;
  /** Starts profiling when `file` is given; the returned function stops and writes the profile. */
  profile(file: string | undefined): Promise<() => Promise<void>>;
  /** Starts V8's sampling heap profiler; the returned function stops it and writes its profile to `file`. */
  sampleHeap(file: string): Promise<() => Promise<void>>;
  /** The server's standard output, when started with `stdout: 'pipe'`. */
  stdout: NodeJS.ReadableStream | null;
  stop(): Promise<void>;
}

/** Forks `moduleUrl` (a tree's bench/chat-turn.bench.ts) as the server `role`. */
export async function startTarget(options: {
  moduleUrl: string;
  role: string;
  name?: string;
  env?: Record<string, string>;
  stdout?: 'inherit' | 'pipe';
  /**
   * Node's and V8's flags on the server's command line, after the ones every server gets; Node's own flags can
   * only go here. (`AGENTD_BENCH_V8_FLAGS` sets V8 flags from inside a running server, as older trees' do.)
   */
  execArgv?: string[];
}): Promise<Target> {
  const { child, port } = await forkRoleServer({
    moduleUrl: options.moduleUrl,
    roleVariable: 'AGENTD_CHAT_TURN_BENCH_ROLE',
    role: options.role,
    env: options.env ?? {},
    execArgv: ['--import', 'tsx', '--expose-gc', ...(options.execArgv ?? [])],
    ...(options.stdout ? { stdout: options.stdout } : {}),
  });
  const ask = <Value = number>(
    type:
      | 'rss'
      | 'memory'
      | 'cpu'
      | 'profile-start'
      | 'profile-stop'
      | 'heap-sampling-start'
      | 'heap-sampling-stop',
    file?: string,
  ) =>
    new Promise<Value>((resolve) => {
      const onMessage = (message: { type: string; value: Value }) => {
        if (message.type !== type) return;
        child.off('message', onMessage);
        resolve(message.value);
      };
      child.on('message', onMessage);
      child.send({ type, file });
    });
  return {
    name: options.name ?? options.role,
    port,
    pid: child.pid!,
    rss: () => ask('rss'),
    memory: () => ask<NodeJS.MemoryUsage>('memory'),
    cpu: () => ask('cpu'),
    profile: async (file) => {
      if (file) await ask('profile-start');
      return async () => {
        if (file) await ask('profile-stop', file);
      };
    },
    sampleHeap: async (file) => {
      await ask('heap-sampling-start');
      return async () => {
        await ask('heap-sampling-stop', file);
      };
    },
    stdout: child.stdout,
    stop: () =>
      new Promise<void>((resolve) => {
        child.removeAllListeners('exit');
        child.once('exit', () => resolve());
        child.send({ type: 'stop' });
      }),
  };
}

/**
 * Closed loop: every client keeps exactly one turn in flight until `durationMs` has passed. `onTurn` hears of
 * each turn as it ends, with when it was sent (`performance.now()`).
 */
export async function closedLoop(
  clients: ChatClient[],
  durationMs: number,
  onTurn?: (latencyMs: number, sentAtMs: number) => void,
): Promise<{ latencies: number[]; elapsedMs: number }> {
  const latencies: number[] = [];
  const started = performance.now();
  const deadline = started + durationMs;
  await Promise.all(
    clients.map(
      (client) =>
        new Promise<void>((resolve) => {
          const next = () => {
            const sentAt = performance.now();
            if (sentAt >= deadline) return resolve();
            sendChatTurn(client, (latency) => {
              latencies.push(latency);
              onTurn?.(latency, sentAt);
              next();
            });
          };
          next();
        }),
    ),
  );
  return { latencies, elapsedMs: performance.now() - started };
}

/**
 * Paced (open) loop: `turnsPerSecond` offered by all clients together, each client sending on its own fixed
 * schedule (one turn every `clients × 1000 ÷ turnsPerSecond` ms, the clients' schedules staggered evenly),
 * until `durationMs` has passed. A chat client sends its next message only after the last one's answer, so
 * a turn that ends after its successor's slot delays that successor; its latency is still counted from the
 * slot, not from the late send (otherwise a stall would hide the turns it held back: "coordinated
 * omission"). `onTurn` hears of each turn as it ends, with its slot (`performance.now()` time).
 */
export async function pacedLoop(
  clients: ChatClient[],
  durationMs: number,
  turnsPerSecond: number,
  onTurn?: (latencyMs: number, slotMs: number) => void,
): Promise<{ latencies: number[]; elapsedMs: number }> {
  const latencies: number[] = [];
  const intervalMs = (clients.length * 1000) / turnsPerSecond;
  const started = performance.now();
  const deadline = started + durationMs;
  await Promise.all(
    clients.map(
      (client, index) =>
        new Promise<void>((resolve) => {
          let slot = started + (index / clients.length) * intervalMs;
          const send = () => {
            // A timer may fire up to a millisecond before its slot (libuv's clock is the loop's, in whole ms):
            // a turn sent early is timed from its send.
            const sentAt = performance.now();
            sendChatTurn(client, () => {
              const latency = performance.now() - Math.min(slot, sentAt);
              latencies.push(latency);
              onTurn?.(latency, slot);
              slot += intervalMs;
              if (slot >= deadline) return resolve();
              const waitMs = slot - performance.now();
              if (waitMs > 0) setTimeout(send, waitMs);
              else send();
            });
          };
          setTimeout(send, slot - performance.now());
        }),
    ),
  );
  return { latencies, elapsedMs: performance.now() - started };
}

/** A load of clients for a while: `pacedLoop` at `pacedTurnsPerSecond` when given, else `closedLoop`. */
export type Load = (
  clients: ChatClient[],
  durationMs: number,
  onTurn?: (latencyMs: number, sentAtMs: number) => void,
) => Promise<{ latencies: number[]; elapsedMs: number }>;

export const loadAt =
  (pacedTurnsPerSecond: number | undefined): Load =>
  (clients, durationMs, onTurn) =>
    pacedTurnsPerSecond === undefined
      ? closedLoop(clients, durationMs, onTurn)
      : pacedLoop(clients, durationMs, pacedTurnsPerSecond, onTurn);

/** How many times this process has called `connect` (its clients' names). */
let connects = 0;

/**
 * `count` clients of `target`, opened 100 at a time, named `<prefix>-<n>-<index>` with `n` new for every call:
 * a run id is the client's name and turn count, and a server answers a run id it has already run from its
 * idempotency cache, with no run and so no final event to end the turn (a second set of rounds on the same
 * servers hung on that).
 */
export async function connect(
  target: Pick<Target, 'port'>,
  count: number,
  prefix: string,
): Promise<ChatClient[]> {
  const clients: ChatClient[] = [];
  const name = `${prefix}-${++connects}`;
  for (let start = 0; start < count; start += 100) {
    clients.push(
      ...(await Promise.all(
        Array.from({ length: Math.min(100, count - start) }, (_, offset) =>
          openChatClient(`ws://127.0.0.1:${target.port}/`, `${name}-${start + offset}`, benchToken),
        ),
      )),
    );
  }
  return clients;
}

/**
 * One turn of `target` (agentd) sizes the bare ws floors' frames: the environment that makes a floor server
 * (`echo`, `durable-floor`) send the same hello and the same frames a turn, and the frames' sizes.
 */
export async function floorFramesOf(
  target: Pick<Target, 'port'>,
): Promise<{ env: Record<string, string>; frameBytes: number[] }> {
  const [probe] = await connect(target, 1, 'probe');
  await new Promise<void>((resolve) => sendChatTurn(probe!, () => resolve()));
  probe!.ws.terminate();
  const frameBytes = probe!.frames.slice();
  return {
    env: {
      AGENTD_BENCH_HELLO_BYTES: String(probe!.helloBytes),
      AGENTD_BENCH_FRAME_BYTES: JSON.stringify(frameBytes),
    },
    frameBytes,
  };
}

/**
 * `sessions` sessions of `target`, each given `turnsPerSession` turns by one of `clients` clients (each client
 * takes its share of the sessions in turn), then every client gone: a server holding many idle sessions, as
 * one does after a busy hour. Resolves with the turns sent.
 */
export async function fillIdleSessions(
  target: Pick<Target, 'port'>,
  options: { sessions: number; turnsPerSession: number; clients: number },
): Promise<number> {
  const clients = await connect(target, Math.min(options.clients, options.sessions), 'idle');
  let turns = 0;
  await Promise.all(
    clients.map(async (client, index) => {
      for (let session = index; session < options.sessions; session += clients.length) {
        client.sessionKey = `agent:main:${client.name}-s${session}`;
        for (let turn = 0; turn < options.turnsPerSession; turn++) {
          await new Promise<void>((resolve) => sendChatTurn(client, () => resolve()));
          turns++;
        }
      }
    }),
  );
  for (const client of clients) client.ws.terminate();
  return turns;
}

/**
 * `clients` closed-loop clients of `target`, timed twice for `measureMs` after a second's settling: untraced
 * (the server's CPU a turn and turns/s), then with `tracer` running (the command and arguments it returns for
 * the server's pid: strace, perf), which is stopped with SIGINT and awaited before this resolves.
 */
export async function untracedThenTraced(
  target: Target,
  options: { clients: number; measureMs: number; prefix: string; tracer: (pid: number) => string[] },
): Promise<{
  untraced: { cpuUsPerTurn: number; turnsPerSecond: number };
  traced: { turns: number; cpuUsPerTurn: number };
}> {
  const clients = await connect(target, options.clients, options.prefix);
  await closedLoop(clients, 1000);
  const timed = async () => {
    const cpuBefore = await target.cpu();
    const run = await closedLoop(clients, options.measureMs);
    const turns = run.latencies.length;
    return {
      turns,
      cpuUsPerTurn: ((await target.cpu()) - cpuBefore) / turns,
      turnsPerSecond: (turns * 1000) / run.elapsedMs,
    };
  };
  const untraced = await timed();
  const [command, ...args] = options.tracer(target.pid);
  const tracer = spawn(command!, args, { stdio: 'ignore' });
  const exited = new Promise((resolve) => tracer.once('exit', resolve));
  // The tracer attaches to every thread before it records; turns before that would go unrecorded.
  await new Promise((resolve) => setTimeout(resolve, 500));
  const traced = await timed();
  tracer.kill('SIGINT');
  await exited;
  for (const client of clients) client.ws.terminate();
  return { untraced, traced };
}

/** 10 clients on sessions of their own for `durationMs`, so the measured phases time optimised code. */
export async function warmUp(target: Target, durationMs: number): Promise<void> {
  const warming = await connect(target, 10, 'warm');
  await closedLoop(warming, durationMs);
  for (const client of warming) client.ws.terminate();
}

export interface RoundFigures {
  cpuPerTurnUs: number[];
  p50Ms: number[];
  p99Ms: number[];
  turnsPerS: number[];
}

/**
 * `rounds` rounds; in each, every target in turn (the order reversed every other round) serves `clients`
 * closed-loop clients (default 1), or with `pacedTurnsPerSecond` that many turns a second from them
 * (`pacedLoop`), for `roundMs` after `warmupMs`. Each round gives each target its CPU a turn, its p50 and
 * p99 and its turns a second.
 */
export async function interleavedRoundsOf(
  targets: Target[],
  options: {
    rounds: number;
    roundMs: number;
    warmupMs: number;
    clients?: number;
    pacedTurnsPerSecond?: number;
  },
): Promise<Map<Target, RoundFigures>> {
  const loop = loadAt(options.pacedTurnsPerSecond);
  const clients = new Map<Target, ChatClient[]>();
  for (const target of targets) clients.set(target, await connect(target, options.clients ?? 1, 'rounds'));
  const figures = new Map<Target, RoundFigures>(
    targets.map((target) => [target, { cpuPerTurnUs: [], p50Ms: [], p99Ms: [], turnsPerS: [] }]),
  );
  for (let round = 0; round < options.rounds; round++) {
    const order = round % 2 === 0 ? targets : [...targets].reverse();
    for (const target of order) {
      const own = clients.get(target)!;
      await loop(own, options.warmupMs);
      const cpuBefore = await target.cpu();
      const { latencies, elapsedMs } = await loop(own, options.roundMs);
      const cpuUs = (await target.cpu()) - cpuBefore;
      const sorted = latencies.slice().sort((a, b) => a - b);
      const figuresOf = figures.get(target)!;
      figuresOf.cpuPerTurnUs.push(cpuUs / sorted.length);
      figuresOf.p50Ms.push(percentile(sorted, 50));
      figuresOf.p99Ms.push(percentile(sorted, 99));
      figuresOf.turnsPerS.push((sorted.length * 1000) / elapsedMs);
    }
  }
  for (const own of clients.values()) for (const client of own) client.ws.terminate();
  return figures;
}

/**
 * Each group's figures round by round, as the mean over the group's processes (`groupOf` names a target's
 * group): one process's figures carry that process's luck, which at 100 clients was over 30 %.
 */
export function roundMeansBy<Group>(
  figures: Map<Target, RoundFigures>,
  groupOf: (target: Target) => Group,
): Map<Group, RoundFigures> {
  const members = new Map<Group, RoundFigures[]>();
  for (const [target, own] of figures) {
    const group = groupOf(target);
    members.set(group, [...(members.get(group) ?? []), own]);
  }
  const mean = (all: RoundFigures[], of: (own: RoundFigures) => number[]) =>
    of(all[0]!).map((_, round) => all.reduce((sum, own) => sum + of(own)[round]!, 0) / all.length);
  return new Map(
    [...members].map(([group, all]) => [
      group,
      {
        cpuPerTurnUs: mean(all, (own) => own.cpuPerTurnUs),
        p50Ms: mean(all, (own) => own.p50Ms),
        p99Ms: mean(all, (own) => own.p99Ms),
        turnsPerS: mean(all, (own) => own.turnsPerS),
      },
    ]),
  );
}

/**
 * One client's `turns` turns, one after another: for each frame of a turn up to its final event (the answer,
 * then the run's events), the median time from sending the turn to that frame's arrival, in microseconds.
 */
export async function frameArrivalsUs(target: Target, turns: number): Promise<number[]> {
  const [client] = await connect(target, 1, 'arrivals');
  const arrivals: number[][] = [];
  let current: number[] = [];
  let sentAt = 0;
  let runId = '';
  // Registered after the client's own listener: the final event ends the turn before it is counted here. The
  // run's final answer follows its final event and may arrive in the next turn: only frames naming the turn's
  // run count.
  client!.ws.on('message', (data: Buffer) => {
    if (data.includes(runId)) current.push((performance.now() - sentAt) * 1000);
  });
  for (let turn = 0; turn < turns; turn++) {
    const times: number[] = [];
    current = times;
    let frames = 0;
    runId = `"${client!.name}-${client!.turn + 1}"`;
    sentAt = performance.now();
    await new Promise<void>((resolve) =>
      sendChatTurn(client!, () => {
        frames = times.length + 1;
        resolve();
      }),
    );
    arrivals.push(times.slice(0, frames));
  }
  client!.ws.terminate();
  const frames = Math.min(...arrivals.map((times) => times.length));
  return Array.from({ length: frames }, (_, index) =>
    Math.round(median(arrivals.map((times) => times[index]!))),
  );
}
