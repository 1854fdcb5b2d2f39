import WebSocket from 'ws';
import type { Bus } from '../../src/bus/index.js';
import { createBus } from '../../src/bus/index.js';
import {
  type ChatHistoryMessage,
  type ChatRunResult,
  createMethodTable,
  type GatewayChatService,
  type GatewayLimits,
  type GatewayMemoryItem,
  type GatewayServer,
  type GatewayServices,
  loadGatewayServer,
  type MethodContext,
  type MethodTable,
  registerCoreMethods,
  type SessionSummary,
} from '../../src/gateway/index.js';
import { type Logger, silentLogger, UserInputError } from '../../src/util/index.js';

export const testToken = 'test-token-123';

/** The OpenClaw methods `registerCoreMethods` serves, as hello-ok advertises them. */
export const coreOpenClawMethods = [
  'health',
  'status',
  'chat.send',
  'chat.history',
  'chat.abort',
  'chat.inject',
  'sessions.list',
  'sessions.preview',
  'sessions.reset',
  'sessions.delete',
  'sessions.compact',
  'sessions.patch',
  'agent',
  'agent.wait',
  'memory.query',
  'memory.recall',
  'sessions.subscribe',
  'sessions.unsubscribe',
  'sessions.describe',
  'sessions.create',
  'commands.list',
  'models.list',
  'question.list',
  'plugin.approval.list',
  'taskSuggestions.list',
];

/** Every method an OpenClaw client may request: the core ones and the `connect` handshake. */
export const openClawRequestMethods = [...coreOpenClawMethods, 'connect'];

interface FakeRun {
  runId: string;
  sessionKey: string;
  result: ChatRunResult | undefined;
  waiters: Array<(result: ChatRunResult) => void>;
  release?: () => void;
}

export interface FakeChatOptions {
  /** Builds the reply; default `echo: <text>`. */
  reply?: (text: string) => string;
  /** Splits the reply into this many deltas. */
  deltas?: number;
  /** When set, runs wait for `releaseRun(runId)` before finishing. */
  holdRuns?: boolean;
  /** Emits a tool call before the reply. */
  withTool?: boolean;
  /** Makes runs end with this error. */
  failWith?: { code: string; message: string; retryable: boolean };
  /** Publishes the whole run (start, text, finish) before `send` returns, as a very fast model may. */
  runBeforeAck?: boolean;
}

/**
 * A chat service that behaves like the engage loop from the gateway's point of view: it publishes real run
 * events on a real bus, keeps a transcript with memory ids, and resolves `wait` after `run:finished`.
 */
/** A method call's context on a connection with `scopes`, sending and watching nothing. */
export function testMethodContext(scopes: string[]): MethodContext {
  return {
    connId: 'c1',
    protocol: 'openclaw',
    scopes,
    clientInfo: { id: 'test' },
    sendEvent: () => undefined,
    watchSession: () => undefined,
    subscribeSessions: () => undefined,
    sessionChanged: () => undefined,
    signal: new AbortController().signal,
    logger: silentLogger,
  };
}

export function createFakeChat(bus: Bus, options: FakeChatOptions = {}) {
  const runs = new Map<string, FakeRun>();
  const transcripts = new Map<string, ChatHistoryMessage[]>();
  const sessionIds = new Map<string, string>();
  const sent: Array<{ sessionKey: string; text: string; idempotencyKey: string; source: unknown }> = [];
  let memoryCounter = 0;
  let sessionCounter = 0;

  const transcript = (sessionKey: string) => {
    let list = transcripts.get(sessionKey);
    if (!list) {
      list = [];
      transcripts.set(sessionKey, list);
      sessionIds.set(sessionKey, `sess-${++sessionCounter}`);
    }
    return list;
  };
  const append = (sessionKey: string, role: ChatHistoryMessage['role'], content: string, runId?: string) => {
    const memoryId = String(++memoryCounter);
    transcript(sessionKey).push({
      role,
      content,
      memoryId,
      timestamp: 1_700_000_000_000 + memoryCounter,
      runId,
    });
    return memoryId;
  };

  const finish = (run: FakeRun, result: ChatRunResult) => {
    run.result = result;
    for (const waiter of run.waiters) waiter(result);
    run.waiters = [];
  };

  const execute = async (run: FakeRun, agentId: string, text: string, userMemoryId: string) => {
    const scope = { runId: run.runId, sessionKey: run.sessionKey, agentId };
    bus.publish(
      'run:started',
      { runId: run.runId, sessionKey: run.sessionKey, agentId, model: 'fake/echo' },
      scope,
    );
    if (options.withTool) {
      bus.publish(
        'run:tool-started',
        { runId: run.runId, toolCallId: 't1', toolName: 'clock', arguments: {} },
        scope,
      );
      bus.publish(
        'run:tool-finished',
        {
          runId: run.runId,
          toolCallId: 't1',
          toolName: 'clock',
          isError: false,
          result: 'noon',
          durationMs: 1,
        },
        scope,
      );
    }
    if (options.holdRuns) await new Promise<void>((resolve) => (run.release = resolve));
    if (run.result) return;
    if (options.failWith) {
      bus.publish(
        'run:finished',
        {
          runId: run.runId,
          status: 'error',
          text: '',
          error: options.failWith,
          usage: { inputTokens: 1, outputTokens: 0 },
          turns: 1,
        },
        scope,
      );
      finish(run, { runId: run.runId, status: 'error', text: '', error: options.failWith, userMemoryId });
      return;
    }
    const reply = (options.reply ?? ((input: string) => `echo: ${input}`))(text);
    const pieces = Math.max(1, options.deltas ?? 2);
    const size = Math.ceil(reply.length / pieces);
    let cumulative = '';
    for (let index = 0; index < reply.length; index += size) {
      const delta = reply.slice(index, index + size);
      cumulative += delta;
      bus.publish('run:text-delta', { runId: run.runId, delta, text: cumulative }, scope);
    }
    const assistantMemoryId = append(run.sessionKey, 'assistant', reply, run.runId);
    bus.publish(
      'run:finished',
      {
        runId: run.runId,
        status: 'completed',
        text: reply,
        usage: { inputTokens: 3, outputTokens: 2 },
        turns: 1,
      },
      scope,
    );
    finish(run, {
      runId: run.runId,
      status: 'completed',
      text: reply,
      assistantMemoryId,
      userMemoryId,
      startedAt: 1,
      endedAt: 2,
      model: 'fake/echo',
      usage: { inputTokens: 3, outputTokens: 2 },
    });
  };

  const service: GatewayChatService = {
    async send(input) {
      sent.push(input);
      const existing = runs.get(input.idempotencyKey);
      if (existing) return { runId: existing.runId, status: 'in_flight' };
      const run: FakeRun = {
        runId: input.idempotencyKey,
        sessionKey: input.sessionKey,
        result: undefined,
        waiters: [],
      };
      runs.set(run.runId, run);
      const userMemoryId = append(input.sessionKey, 'user', input.text);
      if (options.runBeforeAck) await execute(run, input.agentId, input.text, userMemoryId);
      else {
        setImmediate(() => {
          void execute(run, input.agentId, input.text, userMemoryId);
        });
      }
      return { runId: run.runId, status: 'started' };
    },
    wait(runId, waitOptions = {}) {
      const run = runs.get(runId);
      if (!run) return Promise.reject(new UserInputError({ code: 'NOT_FOUND', message: `no run ${runId}` }));
      if (run.result) return Promise.resolve(run.result);
      return new Promise((resolve, reject) => {
        run.waiters.push(resolve);
        if (waitOptions.timeoutMs !== undefined) {
          setTimeout(
            () => reject(new UserInputError({ code: 'TIMEOUT', message: 'wait timed out' })),
            waitOptions.timeoutMs,
          ).unref();
        }
      });
    },
    async abort({ sessionKey, runId }) {
      const runIds: string[] = [];
      for (const run of runs.values()) {
        if (run.sessionKey !== sessionKey || run.result || (runId && run.runId !== runId)) continue;
        runIds.push(run.runId);
        bus.publish(
          'run:finished',
          {
            runId: run.runId,
            status: 'aborted',
            text: '',
            usage: { inputTokens: 0, outputTokens: 0 },
            turns: 0,
          },
          { runId: run.runId, sessionKey },
        );
        finish(run, { runId: run.runId, status: 'aborted', text: '' });
        run.release?.();
      }
      return { aborted: runIds.length > 0, runIds };
    },
    async inject({ sessionKey, role, text }) {
      return { memoryId: append(sessionKey, role, text) };
    },
    async history({ sessionKey, limit }) {
      const list = transcript(sessionKey);
      return {
        sessionKey,
        sessionId: sessionIds.get(sessionKey) as string,
        messages: list.slice(-limit),
        hasMore: list.length > limit,
      };
    },
  };

  return {
    service,
    sent,
    transcripts,
    sessionIds,
    releaseRun(runId: string) {
      runs.get(runId)?.release?.();
    },
    get activeRuns() {
      return [...runs.values()].filter((run) => !run.result).length;
    },
    newSession(sessionKey: string) {
      const previous = sessionIds.get(sessionKey);
      transcripts.set(sessionKey, []);
      sessionIds.set(sessionKey, `sess-${++sessionCounter}`);
      return { previous, current: sessionIds.get(sessionKey) as string };
    },
  };
}

export type FakeChat = ReturnType<typeof createFakeChat>;

/** The one model the fake services run on. */
export const fakeModel = { id: 'scripted-test', provider: 'scripted', contextWindow: 32_768, local: true };

export function createFakeServices(bus: Bus, chatOptions: FakeChatOptions = {}) {
  const chat = createFakeChat(bus, chatOptions);
  const calls: Array<{ method: string; input: unknown }> = [];
  const summary = (key: string): SessionSummary => ({
    key,
    sessionId: chat.sessionIds.get(key) ?? 'none',
    agentId: key.split(':')[1] ?? 'main',
    createdAt: 1,
    updatedAt: 2,
    messageCount: chat.transcripts.get(key)?.length ?? 0,
  });
  const memoryItems = (sessionKey: string): GatewayMemoryItem[] =>
    (chat.transcripts.get(sessionKey) ?? []).map((message) => ({
      kind: 'entry',
      source: 'ram',
      id: Number(message.memoryId),
      role: message.role,
      state: 'active',
      related_to: null,
      content: message.content,
    }));
  const services: GatewayServices = {
    chat: chat.service,
    sessions: {
      async list(input) {
        calls.push({ method: 'sessions.list', input });
        return [...chat.transcripts.keys()].map(summary);
      },
      async preview(input) {
        calls.push({ method: 'sessions.preview', input });
        return input.keys.map((key) => {
          const list = chat.transcripts.get(key);
          return list
            ? {
                key,
                status: 'ok' as const,
                items: list
                  .slice(-input.limit)
                  .map((m) => ({ role: m.role, text: m.content.slice(0, input.maxChars) })),
              }
            : { key, status: 'missing' as const, items: [] };
        });
      },
      async reset(input) {
        calls.push({ method: 'sessions.reset', input });
        const { previous, current } = chat.newSession(input.sessionKey);
        return {
          sessionKey: input.sessionKey,
          sessionId: current,
          archived: input.archive && previous !== undefined,
          ...(previous ? { previousSessionId: previous } : {}),
        };
      },
      async delete(input) {
        calls.push({ method: 'sessions.delete', input });
        return { deleted: chat.transcripts.delete(input.sessionKey) };
      },
      async compact(input) {
        calls.push({ method: 'sessions.compact', input });
        return { compacted: true, entriesBefore: 4, entriesAfter: 1 };
      },
      async patch(input) {
        calls.push({ method: 'sessions.patch', input });
        return { ...summary(input.sessionKey), ...(input.label ? { label: input.label } : {}) };
      },
      async describe(input) {
        calls.push({ method: 'sessions.describe', input });
        return chat.transcripts.has(input.sessionKey) ? summary(input.sessionKey) : undefined;
      },
      async create(input) {
        calls.push({ method: 'sessions.create', input });
        const created = !chat.transcripts.has(input.sessionKey);
        if (created) chat.transcripts.set(input.sessionKey, []);
        return {
          session: { ...summary(input.sessionKey), ...(input.label ? { label: input.label } : {}) },
          created,
        };
      },
    },
    models: {
      list: () => [fakeModel],
      forAgent: () => fakeModel,
    },
    agents: {
      list: () => [{ id: 'main', name: 'Main' }],
      workCounts: async () => ({ queued: 1, running: 1, completed: 2, failed: 1 }),
    },
    memory: {
      async query(input) {
        calls.push({ method: 'memory.query', input });
        const items = memoryItems(input.sessionKey).filter(
          (item) =>
            (input.topic === undefined || String(item.content).includes(input.topic)) &&
            (input.memoryIds === undefined || input.memoryIds.includes(String(item.id))),
        );
        return { items: items.slice(0, input.limit) };
      },
      async recall(input) {
        calls.push({ method: 'memory.recall', input });
        return { items: memoryItems(input.sessionKey).reverse().slice(0, input.limit) };
      },
    },
    health: {
      health: () => ({ ok: true, ts: 1, component: 'fake' }),
      status: () => ({ ok: true, transcripts: chat.transcripts.size }),
    },
  };
  return { services, chat, calls };
}

export interface TestGateway {
  server: GatewayServer;
  url: string;
  port: number;
  bus: Bus;
  table: MethodTable;
  chat: FakeChat;
  calls: Array<{ method: string; input: unknown }>;
  close(): Promise<void>;
}

export async function startTestGateway(
  options: {
    limits?: Partial<GatewayLimits>;
    chat?: FakeChatOptions;
    noAuth?: boolean;
    allowedOrigins?: string[];
    logger?: Logger;
    setup?: (table: MethodTable, bus: Bus) => void;
  } = {},
): Promise<TestGateway> {
  const bus = createBus();
  const table = createMethodTable();
  const { services, chat, calls } = createFakeServices(bus, options.chat);
  registerCoreMethods(table, services, {
    ...(options.limits?.maxMessageBytes ? { maxMessageBytes: options.limits.maxMessageBytes } : {}),
  });
  options.setup?.(table, bus);
  const { createGatewayServer } = await loadGatewayServer();
  const server = createGatewayServer({
    host: '127.0.0.1',
    port: 0,
    token: options.noAuth ? undefined : testToken,
    noAuth: options.noAuth ?? false,
    allowedOrigins: options.allowedOrigins ?? [],
    limits: options.limits ?? {},
    methodTable: table,
    bus,
    services,
    logger: options.logger ?? silentLogger,
    serverVersion: 'test',
  });
  const { url } = await server.listen();
  return {
    server,
    url,
    port: server.address()!.port,
    bus,
    table,
    chat,
    calls,
    close: () => server.close(),
  };
}

type Frame = Record<string, any>;

/** A small test client that queues every frame and lets a test await the next one that matches. */
export class FrameClient {
  readonly frames: Frame[] = [];
  private readonly queue: Frame[] = [];
  private readonly waiters: Array<{ match: (frame: Frame) => boolean; resolve: (frame: Frame) => void }> = [];
  readonly closed: Promise<{ code: number; reason: string }>;
  private nextId = 1;

  constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      let frame: Frame;
      try {
        frame = JSON.parse(data.toString());
      } catch {
        return;
      }
      this.frames.push(frame);
      const index = this.waiters.findIndex((waiter) => waiter.match(frame));
      if (index >= 0) {
        const [waiter] = this.waiters.splice(index, 1);
        waiter!.resolve(frame);
      } else {
        this.queue.push(frame);
      }
    });
    this.closed = new Promise((resolve) => {
      ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() }));
    });
  }

  static async open(url: string, options: WebSocket.ClientOptions = {}): Promise<FrameClient> {
    const ws = new WebSocket(url, options);
    const client = new FrameClient(ws);
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    return client;
  }

  next(match: (frame: Frame) => boolean = () => true): Promise<Frame> {
    const index = this.queue.findIndex(match);
    if (index >= 0) return Promise.resolve(this.queue.splice(index, 1)[0]!);
    return new Promise((resolve) => this.waiters.push({ match, resolve }));
  }

  nextEvent(event: string, match: (payload: Frame) => boolean = () => true): Promise<Frame> {
    return this.next(
      (frame) => frame.type === 'event' && frame.event === event && match(frame.payload ?? {}),
    );
  }

  send(frame: unknown): void {
    this.ws.send(typeof frame === 'string' ? frame : JSON.stringify(frame));
  }

  /** Sends a request and resolves with its (first) response frame. */
  async request(method: string, params?: unknown, id = `r${this.nextId++}`): Promise<Frame> {
    this.send({ type: 'req', id, method, ...(params === undefined ? {} : { params }) });
    return await this.next((frame) => frame.type === 'res' && frame.id === id);
  }

  close(): void {
    this.ws.close();
  }
}

export interface ConnectOptions {
  token?: string | undefined;
  minProtocol?: number;
  maxProtocol?: number;
  scopes?: string[];
  caps?: string[];
  device?: Record<string, unknown> | ((nonce: string) => Record<string, unknown>);
  client?: Record<string, unknown>;
}

/** Opens an OpenClaw connection and completes the handshake; returns the client and the connect response. */
export async function connectOpenClaw(url: string, options: ConnectOptions = {}) {
  const client = await FrameClient.open(url);
  const challenge = await client.nextEvent('connect.challenge');
  const nonce = challenge.payload.nonce as string;
  const device = typeof options.device === 'function' ? options.device(nonce) : options.device;
  const response = await client.request(
    'connect',
    {
      minProtocol: options.minProtocol ?? 4,
      maxProtocol: options.maxProtocol ?? 4,
      client: options.client ?? { id: 'test', version: '1.0.0', platform: 'linux', mode: 'cli' },
      role: 'operator',
      scopes: options.scopes ?? ['operator.read', 'operator.write', 'operator.admin'],
      caps: options.caps ?? [],
      ...(options.token === undefined && 'token' in options
        ? {}
        : { auth: { token: options.token ?? testToken } }),
      ...(device ? { device } : {}),
    },
    'connect-1',
  );
  return { client, response, nonce, challenge };
}
