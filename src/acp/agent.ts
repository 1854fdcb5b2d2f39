import {
  type AgentApp,
  type AgentContext,
  agent,
  type ContentBlock,
  type PlanEntry,
  PROTOCOL_VERSION,
  RequestError,
  type SessionUpdate,
  type StopReason,
  type ToolKind,
} from '@agentclientprotocol/sdk';
import type { Bus, BusEvent, RunStatus } from '../bus/index.js';
import type { ChatService } from '../chat/index.js';
import type { ToolApprovalRequest, ToolApprover } from '../tools/index.js';
import type { IdGenerator, Logger } from '../util/index.js';

/** What the ACP agent needs of the runtime. */
export interface AcpAgentHost {
  chat: Pick<ChatService, 'send' | 'wait' | 'abort'>;
  bus: Bus;
  /** The session's transcript, oldest first (for `session/load`); empty when the session is unknown. */
  history(sessionKey: string): Promise<Array<{ role: string; content: string }>>;
  registerApprover(sessionKey: string, approver: ToolApprover): () => void;
}

export interface CreateAcpAgentOptions {
  host: AcpAgentHost;
  /** Which agentd agent the editor talks to. */
  agentId?: string;
  version: string;
  idGenerator: IdGenerator;
  logger: Logger;
  /**
   * Sessions kept open (each holds bus subscriptions and an approver) before the least recently used idle
   * one is closed; its conversation stays stored, and `session/load` opens it again. Default 1,000.
   */
  maxOpenSessions?: number;
}

const sessionIdPattern = /^acp-[A-Za-z0-9_-]{1,80}$/;

/** A tool's name decides its ACP kind, which editors use to pick an icon and a rendering. */
export function toolKindOf(toolName: string): ToolKind {
  if (/^(read_file|list_files|memory_get|ledger_read|skill_)/.test(toolName)) return 'read';
  if (/^(write_file|edit_file|append_file)/.test(toolName)) return 'edit';
  if (/^(delete|remove)/.test(toolName)) return 'delete';
  if (/^(grep|search|glob|memory_search|find)/.test(toolName)) return 'search';
  if (/^(bash|shell|exec)/.test(toolName)) return 'execute';
  if (/^http_fetch/.test(toolName)) return 'fetch';
  return 'other';
}

function toolTitle(toolName: string, args: Record<string, unknown>): string {
  const target = ['path', 'command', 'url', 'query', 'pattern'].map((key) => args[key]).find(Boolean);
  return typeof target === 'string' ? `${toolName} ${target.slice(0, 120)}` : toolName;
}

/** ACP prompt blocks to the one text message agentd's chat takes. */
export function promptText(blocks: ContentBlock[]): string {
  return blocks
    .map((block) => {
      switch (block.type) {
        case 'text':
          return block.text;
        case 'resource_link':
          return `[${block.name}](${block.uri})`;
        case 'resource':
          return 'text' in block.resource
            ? `Context from ${block.resource.uri}:\n\`\`\`\n${block.resource.text}\n\`\`\``
            : `[binary resource ${block.resource.uri}]`;
        default:
          return `[${block.type} attachment omitted]`;
      }
    })
    .join('\n\n');
}

function stopReasonOf(status: RunStatus | 'running'): StopReason {
  switch (status) {
    case 'aborted':
      return 'cancelled';
    case 'max_turns':
      return 'max_turn_requests';
    case 'budget_exceeded':
      return 'max_tokens';
    case 'blocked':
      return 'refusal';
    default:
      return 'end_turn';
  }
}

interface AcpSession {
  sessionId: string;
  sessionKey: string;
  cancelled: boolean;
  /** A prompt is running (ACP allows one at a time per session). */
  busy: boolean;
  runId?: string;
  /** Tools the user allowed for the rest of the session ("always allow"). */
  alwaysAllowed: Set<string>;
  plan: Map<string, PlanEntry>;
  unsubscribe: Array<() => void>;
}

/**
 * agentd as an ACP agent: each ACP session is an agentd chat session (`agent:<agent>:<sessionId>`), a prompt
 * is a chat turn whose bus events are streamed back as `session/update`s (message chunks, tool calls with
 * status, the planner's plan), `session/cancel` aborts the turn, and tools the policy marks `ask` are put to
 * the editor with `session/request_permission`.
 */
export function createAcpAgent(options: CreateAcpAgentOptions): AgentApp {
  const { host, logger } = options;
  const agentId = options.agentId ?? 'main';
  const sessions = new Map<string, AcpSession>();
  /** Updates go out in publish order; each session's notifications are chained. */
  const outbox = new Map<string, Promise<void>>();

  const maxOpenSessions = options.maxOpenSessions ?? 1_000;

  const send = (client: AgentContext, sessionId: string, update: SessionUpdate): Promise<void> => {
    const next: Promise<void> = (outbox.get(sessionId) ?? Promise.resolve())
      .then(() => client.notify('session/update', { sessionId, update }))
      .catch((error: unknown) => logger.debug({ err: error, sessionId }, 'session/update not delivered'))
      .finally(() => {
        // A chain that went out entirely is not kept: one entry per session ever opened would only grow.
        if (outbox.get(sessionId) === next) outbox.delete(sessionId);
      });
    outbox.set(sessionId, next);
    return next;
  };

  // A copy: the entries change as tasks progress, and the update is serialized later.
  const sendPlan = (client: AgentContext, session: AcpSession) =>
    send(client, session.sessionId, {
      sessionUpdate: 'plan',
      entries: [...session.plan.values()].map((entry) => ({ ...entry })),
    });

  const approverFor =
    (client: AgentContext, session: AcpSession): ToolApprover =>
    async (request: ToolApprovalRequest) => {
      if (session.alwaysAllowed.has(request.toolName)) return true;
      await outbox.get(session.sessionId);
      const response = await client.request(
        'session/request_permission',
        {
          sessionId: session.sessionId,
          toolCall: {
            toolCallId: request.toolCallId,
            title: toolTitle(request.toolName, request.arguments),
            kind: toolKindOf(request.toolName),
            status: 'pending',
            rawInput: request.arguments,
          },
          options: [
            { optionId: 'allow_once', name: 'Allow', kind: 'allow_once' },
            { optionId: 'allow_always', name: `Always allow ${request.toolName}`, kind: 'allow_always' },
            { optionId: 'reject_once', name: 'Reject', kind: 'reject_once' },
          ],
        },
        { cancellationSignal: request.signal, stopWaitingOnCancel: true },
      );
      if (response.outcome.outcome !== 'selected') return false;
      if (response.outcome.optionId === 'allow_always') session.alwaysAllowed.add(request.toolName);
      return response.outcome.optionId.startsWith('allow');
    };

  const close = (session: AcpSession): void => {
    for (const off of session.unsubscribe) off();
    sessions.delete(session.sessionId);
  };

  /** The session, now the most recently used (the Map's order is the eviction order). */
  const use = (session: AcpSession): AcpSession => {
    sessions.delete(session.sessionId);
    sessions.set(session.sessionId, session);
    return session;
  };

  /** Makes room for one more session: the least recently used one without a running prompt is closed. */
  const makeRoom = (): void => {
    if (sessions.size < maxOpenSessions) return;
    for (const session of sessions.values()) {
      if (session.busy) continue;
      close(session);
      logger.debug({ sessionId: session.sessionId }, 'closed the least recently used ACP session');
      return;
    }
    throw RequestError.invalidRequest(
      { maxOpenSessions },
      `${maxOpenSessions} sessions are open and every one is running a prompt`,
    );
  };

  const openSession = (client: AgentContext, sessionId: string): AcpSession => {
    const existing = sessions.get(sessionId);
    if (existing) return use(existing);
    makeRoom();
    const session: AcpSession = {
      sessionId,
      sessionKey: `agent:${agentId}:${sessionId}`,
      cancelled: false,
      busy: false,
      alwaysAllowed: new Set(),
      plan: new Map(),
      unsubscribe: [],
    };
    sessions.set(sessionId, session);
    session.unsubscribe.push(host.registerApprover(session.sessionKey, approverFor(client, session)));
    // The planner's tasks run after the turn that made the plan; their progress still updates the plan.
    session.unsubscribe.push(
      host.bus.subscribe({ sessionKey: session.sessionKey, types: ['agent:plan'] }, (event) => {
        const { tasks } = event.data;
        session.plan = new Map(
          tasks.map((task) => [
            task.workItemId,
            { content: task.title, priority: 'medium', status: 'pending' } satisfies PlanEntry,
          ]),
        );
        void sendPlan(client, session);
      }),
      host.bus.subscribe(
        { types: ['work:started', 'work:completed', 'work:dead', 'work:cancelled'] },
        (event) => {
          const entry = session.plan.get(event.data.workItemId);
          if (!entry) return;
          entry.status = event.type === 'work:started' ? 'in_progress' : 'completed';
          void sendPlan(client, session);
        },
      ),
    );
    return session;
  };

  const closeAll = () => {
    for (const session of [...sessions.values()]) close(session);
  };

  return agent({ name: 'agentd' })
    .onConnect((connection) => {
      void connection.closed.then(closeAll);
    })
    .onRequest('initialize', () => ({
      protocolVersion: PROTOCOL_VERSION,
      agentCapabilities: {
        loadSession: true,
        promptCapabilities: { embeddedContext: true },
      },
      agentInfo: { name: 'agentd', title: 'agentd', version: options.version },
      authMethods: [],
    }))
    .onRequest('session/new', ({ client }) => {
      const session = openSession(client, `acp-${options.idGenerator('session')}`);
      return { sessionId: session.sessionId };
    })
    .onRequest('session/load', async ({ client, params }) => {
      if (!sessionIdPattern.test(params.sessionId)) throw RequestError.resourceNotFound(params.sessionId);
      const sessionKey = `agent:${agentId}:${params.sessionId}`;
      const messages = await host.history(sessionKey);
      if (messages.length === 0) throw RequestError.resourceNotFound(params.sessionId);
      const session = openSession(client, params.sessionId);
      for (const message of messages) {
        if (message.role !== 'user' && message.role !== 'assistant') continue;
        await send(client, session.sessionId, {
          sessionUpdate: message.role === 'user' ? 'user_message_chunk' : 'agent_message_chunk',
          content: { type: 'text', text: message.content },
        });
      }
      return {};
    })
    .onRequest('session/prompt', async ({ client, params }) => {
      const open = sessions.get(params.sessionId);
      if (!open) throw RequestError.resourceNotFound(params.sessionId);
      const session = use(open);
      if (session.busy) throw RequestError.invalidRequest(undefined, 'a prompt is already running');
      session.busy = true;
      session.cancelled = false;
      type RunEvent = BusEvent<'run:text-delta' | 'run:tool-started' | 'run:tool-finished'>;
      const early: RunEvent[] = [];
      let runId: string | undefined;
      const forward = (event: RunEvent) => {
        if (event.data.runId !== runId) return;
        if (event.type === 'run:text-delta') {
          const { delta } = event.data;
          void send(client, session.sessionId, {
            sessionUpdate: 'agent_message_chunk',
            content: { type: 'text', text: delta },
          });
        } else if (event.type === 'run:tool-started') {
          const started = event.data;
          void send(client, session.sessionId, {
            sessionUpdate: 'tool_call',
            toolCallId: started.toolCallId,
            title: toolTitle(started.toolName, started.arguments),
            kind: toolKindOf(started.toolName),
            status: 'in_progress',
            rawInput: started.arguments,
          });
        } else if (event.type === 'run:tool-finished') {
          const finished = event.data;
          void send(client, session.sessionId, {
            sessionUpdate: 'tool_call_update',
            toolCallId: finished.toolCallId,
            status: finished.isError ? 'failed' : 'completed',
            content: [{ type: 'content', content: { type: 'text', text: finished.result } }],
          });
        }
      };
      const off = host.bus.subscribe(
        {
          sessionKey: session.sessionKey,
          types: ['run:text-delta', 'run:tool-started', 'run:tool-finished'],
        },
        (event) => (runId === undefined ? early.push(event) : forward(event)),
      );
      try {
        const sent = await host.chat.send({
          sessionKey: session.sessionKey,
          agentId,
          text: promptText(params.prompt),
          idempotencyKey: options.idGenerator('acp'),
        });
        runId = sent.runId;
        session.runId = runId;
        for (const event of early.splice(0)) forward(event);
        // A cancel that arrived while the message was being accepted applies to this run.
        if (session.cancelled) await host.chat.abort({ sessionKey: session.sessionKey, runId });
        const record = await host.chat.wait(runId);
        await outbox.get(session.sessionId);
        if (session.cancelled) return { stopReason: 'cancelled' as const };
        if (record.status === 'error') {
          throw RequestError.internalError(
            { code: record.error?.code },
            record.error?.message ?? 'the run failed',
          );
        }
        return { stopReason: stopReasonOf(record.status) };
      } finally {
        off();
        session.runId = undefined;
        session.busy = false;
      }
    })
    .onNotification('session/cancel', async ({ params }) => {
      const session = sessions.get(params.sessionId);
      if (!session) return;
      session.cancelled = true;
      if (session.runId) await host.chat.abort({ sessionKey: session.sessionKey, runId: session.runId });
    });
}
