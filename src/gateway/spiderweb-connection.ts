import type WebSocket from 'ws';
import { ErrorCodes, rememberNewest } from '../util/index.js';
import {
  type ConnectionDeps,
  closeGraceMs,
  createLiveness,
  type GatewayConnection,
  rawToString,
  toWireError,
} from './connection.js';
import type { EventSink, RunWireEvent } from './event-hub.js';
import { isAsyncResult, type MethodContext } from './method-table.js';
import { CloseCodes, createOutbound } from './outbound.js';
import { OperatorScopes } from './scopes.js';

/** What a Spiderweb client may declare (query `capabilities=a,b` or a `session.capabilities` message). */
const spiderwebCapabilities = {
  /** `session.delta {request, sessionKey, delta, text}` while a reply is generated. */
  stream: 'stream',
  /** `tool.event {request, sessionKey, phase, toolName, toolCallId, …}`. */
  toolEvents: 'tool-events',
  /** Every additive outbound event (each can also be declared by its wire name, e.g. `agent.blocked`). */
  events: 'events',
} as const;

/** Distinct capabilities one connection may hold (query string and messages together). */
export const maxDeclaredCapabilities = 64;

/** What the server tells every client in `session.ack.capabilities`. */
const serverCapabilities = [
  'stream',
  'tool-events',
  'events',
  'request-echo',
  'memory.query',
  'memory.recall',
  'session.reset',
  'session.new',
];

/** A reply can take this long; the engage loop has its own limits, this is only a backstop. */
const replyWaitMs = 15 * 60_000;

/** Generated request ids are 16 characters, as the original server made them. */
function generateRequestId(idGenerator: ConnectionDeps['idGenerator']): string {
  return idGenerator().slice(-16);
}

/** MemoryIDs were numbers on the original wire; keep them numbers where they still are. */
function wireMemoryId(memoryId: string | undefined): string | number | null {
  if (memoryId === undefined) return null;
  return /^\d{1,15}$/.test(memoryId) ? Number(memoryId) : memoryId;
}

function spiderwebErrorCode(code: string): string {
  return code.toLowerCase();
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function optionalString(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

function optionalBoolean(value: unknown): boolean | undefined {
  return typeof value === 'boolean' ? value : undefined;
}

/**
 * One Spiderweb flat-protocol connection, bound to one agent and one session. Inbound messages are
 * translated into method-table calls; replies echo the request id as `request`. Unknown message types and
 * fields are ignored, and additive outbound messages only go to clients that declared them.
 */
export function acceptSpiderwebConnection(
  ws: WebSocket,
  session: { agentId: string; sessionKey: string; capabilities: string[] },
  deps: ConnectionDeps,
): GatewayConnection {
  const { table, hub, limits, clock } = deps;
  const connId = deps.idGenerator('conn');
  const logger = deps.logger.child({ connId, protocol: 'spiderweb', sessionKey: session.sessionKey });
  const out = createOutbound(ws, { maxBufferedBytes: limits.maxBufferedBytes, closeGraceMs, logger });
  const abort = new AbortController();
  const checkLiveness = createLiveness(ws);
  const { agentId, sessionKey } = session;
  const capabilities = new Set(session.capabilities);
  /** Runs this connection started, with the request id that started them. */
  const ownRuns = new Map<string, string>();
  const scopes = [OperatorScopes.admin];
  let pending = 0;
  let closed = false;

  const send = (message: Record<string, unknown>) => out.send(message);
  const sendError = (request: string | null, code: string, message: string) =>
    send({ type: 'error', code, message, request });

  const onRunEvent = (event: RunWireEvent) => {
    const request = ownRuns.get(event.run.runId);
    if (request === undefined) return;
    if (event.kind === 'assistant' && capabilities.has(spiderwebCapabilities.stream)) {
      send({ type: 'session.delta', request, sessionKey, delta: event.delta, text: event.text });
    } else if (event.kind === 'tool' && capabilities.has(spiderwebCapabilities.toolEvents)) {
      send({
        type: 'tool.event',
        request,
        sessionKey,
        phase: event.phase,
        toolName: event.toolName,
        toolCallId: event.toolCallId,
        ...(event.isError !== undefined ? { isError: event.isError } : {}),
        ...(event.durationMs !== undefined ? { durationMs: event.durationMs } : {}),
      });
    }
  };

  // `/goal` from this client: its synthesis comes back to it as the reply, a `session.receive` answering the
  // request. A synthesis can beat the goal's own answer (fast tasks), so recent ones wait here briefly.
  const goalRequests = new Map<string, string | undefined>();
  const unclaimedSyntheses = new Map<string, string>();
  const receiveSynthesis = (request: string | undefined, planId: string, text: string) =>
    send({ type: 'session.receive', request, sessionKey, content: text, planId });
  /** A plan's synthesis, to the `/goal` request that asked for it, or kept until that request's answer. */
  const synthesisArrived = (planId: string, text: string) => {
    if (goalRequests.has(planId)) {
      receiveSynthesis(goalRequests.get(planId), planId, text);
      goalRequests.delete(planId);
    } else {
      rememberBounded(unclaimedSyntheses, planId, text);
    }
  };

  const sink: EventSink = {
    connId,
    scopes,
    onRunEvent,
    onForwardedEvent(entry, event) {
      if (event.type === 'agent:synthesis' && event.sessionKey === sessionKey) {
        synthesisArrived(event.data.planId, event.data.text);
      }
      if (
        entry.spiderweb === 'additive' &&
        !capabilities.has(spiderwebCapabilities.events) &&
        !capabilities.has(entry.wireName)
      ) {
        return;
      }
      if (event.agentId !== undefined && event.agentId !== agentId) return;
      send({ type: entry.wireName, sessionKey, ...entry.toPayload(event) });
    },
  };

  const context: MethodContext = {
    connId,
    protocol: 'spiderweb',
    scopes,
    clientInfo: { id: 'spiderweb', mode: 'spiderweb' },
    sendEvent: (event, payload) => {
      // The synthesis of a plan a `/goal` sent again was answered with (agent.control's, to this caller
      // alone): delivered as the plan's own synthesis is.
      if (
        event === 'agent.synthesis' &&
        isRecord(payload) &&
        typeof payload.planId === 'string' &&
        typeof payload.text === 'string'
      ) {
        synthesisArrived(payload.planId, payload.text);
        return;
      }
      send({ type: event, sessionKey, ...(isRecord(payload) ? payload : { payload }) });
    },
    // A Spiderweb connection watches exactly its own session, from the start.
    watchSession: () => undefined,
    // Spiderweb has no session-index events; its clients never subscribe, but their resets are announced.
    subscribeSessions: () => undefined,
    sessionChanged: (change) => hub.sessionChanged(change),
    signal: abort.signal,
    logger,
  };

  const invoke = async (method: string, params: Record<string, unknown>): Promise<unknown> => {
    const result = await table.invoke(method, params, context);
    return isAsyncResult(result) ? await result.final : result;
  };

  const chat = async (request: string, content: string) => {
    const ack = (await invoke('chat.send', {
      sessionKey,
      message: content,
      idempotencyKey: `${connId}:${request}`,
    })) as { runId?: string; status?: string };
    if (!ack.runId) return;
    ownRuns.set(ack.runId, request);
    try {
      const result = (await invoke('agent.wait', { runId: ack.runId, timeoutMs: replyWaitMs })) as {
        status: string;
        runStatus?: string;
        text?: string;
        memoryId?: string;
        error?: { code: string; message: string };
      };
      if (result.status === 'ok' && result.runStatus !== 'aborted') {
        send({
          type: 'session.receive',
          content: result.text ?? '',
          memoryId: wireMemoryId(result.memoryId),
          request,
        });
      } else if (result.status === 'timeout') {
        sendError(request, 'runtime_timeout', 'the reply did not finish in time');
      } else if (result.runStatus === 'aborted') {
        sendError(request, 'runtime_cancelled', 'the run was aborted');
      } else {
        sendError(
          request,
          spiderwebErrorCode(result.error?.code ?? 'execution_failed'),
          result.error?.message ?? 'the run failed',
        );
      }
    } finally {
      ownRuns.delete(ack.runId);
    }
  };

  const reset = async (
    request: string,
    type: 'session.new' | 'session.reset',
    message: Record<string, unknown>,
  ) => {
    const result = (await invoke('sessions.reset', {
      key: sessionKey,
      reason: type === 'session.new' ? 'new' : 'reset',
      archive: optionalBoolean(message.archive) ?? true,
    })) as { archived?: boolean; sessionId?: string };
    send({ type, request, sessionKey, archived: result.archived ?? false });
  };

  /** Routes to a method another subsystem registers; says `unsupported` while none is. */
  const optionalMethod = async (
    request: string,
    method: string,
    params: Record<string, unknown>,
    reply: (result: unknown) => Record<string, unknown>,
  ) => {
    if (!table.has(method)) {
      sendError(request, 'unsupported', `${method} is not available on this server`);
      return;
    }
    send(reply(await invoke(method, params)));
  };

  // agentd's addition to the protocol: a goal sent again after a lost answer with the same key gets the plan
  // already made (agent.control validates it; a key that is not a string is refused there too).
  const goalKeyOf = (message: Record<string, unknown>): { idempotencyKey?: unknown } => {
    const key = message.idempotency_key ?? message.idempotencyKey;
    return key === undefined ? {} : { idempotencyKey: key };
  };

  const handle = async (type: string, request: string, message: Record<string, unknown>) => {
    switch (type) {
      case 'ping':
        send({ type: 'pong', timestamp: clock.now(), request });
        return;
      case 'chat.send':
      case 'session.send': {
        const content = optionalString(message.content) ?? optionalString(message.text);
        if (content === undefined || content.trim().length === 0) {
          sendError(request, 'missing_content', `${type} needs a non-empty content`);
          return;
        }
        const command = content.trim();
        if (command === '/new') return await reset(request, 'session.new', message);
        if (command.startsWith('/goal ')) {
          const goal = command.slice('/goal '.length).trim();
          return await optionalMethod(
            request,
            'agent.control',
            { sessionKey, agentId, action: 'goal', goal, ...goalKeyOf(message) },
            (result) => {
              const planId =
                isRecord(result) && typeof result.planId === 'string' ? result.planId : undefined;
              if (planId !== undefined) {
                const early = unclaimedSyntheses.get(planId);
                if (early !== undefined) {
                  unclaimedSyntheses.delete(planId);
                  // After the goal's answer below, as if the synthesis had arrived later.
                  queueMicrotask(() => receiveSynthesis(request, planId, early));
                } else rememberBounded(goalRequests, planId, request);
              }
              return { type: 'agent.control', request, sessionKey, ...(isRecord(result) ? result : {}) };
            },
          );
        }
        return await chat(request, content);
      }
      case 'session.new':
      case 'session.reset':
        return await reset(request, type, message);
      case 'memory.query': {
        const result = (await invoke('memory.query', {
          sessionKey,
          ...(message.topic !== undefined ? { topic: message.topic } : {}),
          ...(message.memoryId !== undefined ? { memoryId: message.memoryId } : {}),
          ...(message.memoryIds !== undefined ? { memoryIds: message.memoryIds } : {}),
          ...(message.kind !== undefined ? { kind: message.kind } : {}),
          ...(message.limit !== undefined ? { limit: message.limit } : {}),
          ...(message.include_archived !== undefined ? { includeArchived: message.include_archived } : {}),
        })) as { topic: string | null; items: unknown[] };
        send({ type: 'memory.query', request, sessionKey, topic: result.topic, items: result.items });
        return;
      }
      case 'memory.recall': {
        const result = (await invoke('memory.recall', {
          sessionKey,
          ...(message.limit !== undefined ? { limit: message.limit } : {}),
          ...(message.include_archived !== undefined ? { includeArchived: message.include_archived } : {}),
          ...(message.include_full !== undefined ? { includeFull: message.include_full } : {}),
        })) as { items: unknown[] };
        send({ type: 'memory.recall', request, sessionKey, items: result.items });
        return;
      }
      case 'agent.control':
      case 'agent.heartbeat': {
        const action = type === 'agent.heartbeat' ? 'heartbeat' : optionalString(message.action);
        const params: Record<string, unknown> = { sessionKey, agentId, action };
        const goal = optionalString(message.goal) ?? optionalString(message.content);
        if (goal !== undefined) Object.assign(params, { goal, ...goalKeyOf(message) });
        return await optionalMethod(request, 'agent.control', params, (result) => ({
          type: 'agent.control',
          request,
          sessionKey,
          ...(isRecord(result) ? result : {}),
        }));
      }
      case 'agent_spawn_request': {
        const config = isRecord(message.agent_config) ? message.agent_config : {};
        const params: Record<string, unknown> = {};
        if (config.name !== undefined) params.name = config.name;
        if (config.role !== undefined) params.role = config.role;
        if (config.cli_backend !== undefined) params.cliBackend = config.cli_backend;
        if (config.system_prompt !== undefined) params.systemPrompt = config.system_prompt;
        if (config.initial_context !== undefined) params.initialContext = config.initial_context;
        if (config.initial_position !== undefined) params.initialPosition = config.initial_position;
        return await optionalMethod(request, 'agents.spawn', params, (result) => {
          const body = isRecord(result) ? result : {};
          return {
            type: 'agent_spawn_response',
            request,
            ...(typeof body.agentId === 'string' ? { agent_id: body.agentId } : {}),
            ...body,
          };
        });
      }
      case 'agent_message':
      case 'agents.message': {
        const content = optionalString(message.content) ?? optionalString(message.text);
        if (content === undefined || content.trim().length === 0) {
          sendError(request, 'missing_content', `${type} needs a non-empty content`);
          return;
        }
        const target = optionalString(message.agent_id) ?? optionalString(message.agentId) ?? agentId;
        const from = optionalString(message.from);
        return await optionalMethod(
          request,
          'agents.message',
          { agentId: target, content, ...(from ? { from } : {}) },
          () => ({ type: 'agent_message', request, agent_id: target, delivered: true }),
        );
      }
      case 'agent_task_assign':
      case 'agents.assign': {
        const task =
          optionalString(message.task_name) ??
          optionalString(message.task) ??
          optionalString(message.content);
        if (task === undefined || task.trim().length === 0) {
          sendError(request, 'missing_content', `${type} needs a non-empty task_name`);
          return;
        }
        const target = optionalString(message.agent_id) ?? optionalString(message.agentId) ?? agentId;
        const taskId = optionalString(message.task_id) ?? optionalString(message.taskId);
        return await optionalMethod(
          request,
          'agents.assign',
          { agentId: target, task, ...(taskId ? { taskId } : {}) },
          (result) => ({
            type: 'agent_task_assign',
            request,
            agent_id: target,
            ...(isRecord(result) ? result : {}),
          }),
        );
      }
      case 'agent_conversation_request':
      case 'agents.conversation':
      case 'agent_history_request':
      case 'agents.history': {
        const conversation = type === 'agent_conversation_request' || type === 'agents.conversation';
        const target = optionalString(message.agent_id) ?? optionalString(message.agentId) ?? agentId;
        const limit = typeof message.limit === 'number' ? { limit: message.limit } : {};
        return await optionalMethod(
          request,
          conversation ? 'agents.conversation' : 'agents.history',
          { agentId: target, ...limit },
          (result) => ({
            type: conversation ? 'agent_conversation' : 'agent_history',
            request,
            agent_id: target,
            ...(isRecord(result) ? result : {}),
          }),
        );
      }
      case 'session.capabilities': {
        const declared = Array.isArray(message.capabilities) ? message.capabilities : [];
        for (const capability of declared.slice(0, maxDeclaredCapabilities)) {
          // Once full, the set stays as it is: a client may repeat this message forever without growing it.
          if (capabilities.size >= maxDeclaredCapabilities) break;
          if (typeof capability === 'string' && capability.length <= 64) capabilities.add(capability);
        }
        send({ type: 'session.capabilities', request, capabilities: [...capabilities].sort() });
        return;
      }
      default:
        // Unknown types are ignored so that newer clients keep working against this server.
        logger.debug({ type }, 'gateway: ignored an unknown Spiderweb message type');
    }
  };

  ws.on('message', (data, isBinary) => {
    if (closed) return;
    let message: unknown;
    try {
      message = isBinary ? undefined : JSON.parse(rawToString(data));
    } catch {
      message = undefined;
    }
    if (!isRecord(message) || typeof message.type !== 'string') {
      sendError(null, 'invalid_envelope', 'expected a JSON object with a string "type"');
      return;
    }
    const rawId = message.id;
    const request =
      typeof rawId === 'string' && rawId.length > 0 && rawId.length <= 256
        ? rawId
        : typeof rawId === 'number' && Number.isFinite(rawId)
          ? String(rawId)
          : generateRequestId(deps.idGenerator);
    if (pending >= limits.maxPendingRequests) {
      sendError(
        request,
        'queue_saturated',
        `too many requests in flight on this connection (limit ${limits.maxPendingRequests})`,
      );
      return;
    }
    pending++;
    handle(message.type, request, message)
      .catch((error: unknown) => {
        const wire = toWireError(error, logger);
        sendError(request, spiderwebErrorCode(wire.code), wire.message);
      })
      .finally(() => {
        pending--;
      });
  });

  const connection: GatewayConnection = {
    connId,
    protocol: 'spiderweb',
    socket: ws,
    tick: checkLiveness,
    shutdown(reason) {
      out.close(CloseCodes.goingAway, reason);
    },
  };

  ws.on('close', () => {
    closed = true;
    abort.abort();
    hub.detach(sink);
    ownRuns.clear();
    deps.onClose(connection);
  });
  ws.on('error', (error) => logger.debug({ err: error }, 'gateway: socket error'));

  hub.attach(sink);
  hub.watch(sink, sessionKey);
  send({ type: 'session.ack', sessionKey, agentId, capabilities: serverCapabilities });
  logger.info({ agentId, capabilities: [...capabilities] }, 'gateway: Spiderweb client connected');
  // A client of a server running without its database is told so explicitly, every time.
  void Promise.resolve()
    .then(() => deps.services.health.health())
    .then((health) => {
      const store = health.store as { mode?: string; degradedReason?: string } | undefined;
      if (health.status === 'degraded' && !closed) {
        send({
          type: 'error',
          code: ErrorCodes.storeUnavailable,
          // RAM-only from the start loses everything at exit; a store that stopped taking writes is retried.
          message: `${
            store?.mode === 'memory'
              ? 'agentd runs RAM-only; nothing from this session will be kept'
              : 'agentd cannot write its database right now; new messages are refused until it can, and replies are kept in RAM and written through when it is back'
          }${store?.degradedReason ? `: ${store.degradedReason}` : ''}`,
          request: null,
        });
      }
    })
    .catch((error: unknown) => logger.warn({ err: error }, 'gateway: health check after session.ack failed'));
  return connection;
}

/** Plans one connection waits for (or syntheses it holds) at most: a plan that never ends cannot grow it. */
const maxRememberedPlans = 16;

function rememberBounded<Value>(map: Map<string, Value>, key: string, value: Value): void {
  rememberNewest(map, key, value, maxRememberedPlans);
}
