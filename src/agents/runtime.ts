import { z } from 'zod';
import type { Bus } from '../bus/index.js';
import {
  type SqlDatabase,
  type SqlExecutor,
  type SqlValue,
  sqlPlaceholders,
  sqlValueRows,
} from '../store/index.js';
import {
  type Clock,
  closeOwner,
  createIdGenerator,
  createRefusedWrites,
  createSemaphore,
  ErrorCodes,
  type IdGenerator,
  isStoreUnavailable,
  type Logger,
  openOwner,
  ownerMayBeAlive,
  SystemError,
  silentLogger,
  systemClock,
  UserInputError,
} from '../util/index.js';
import {
  clampToWorld,
  type Decision,
  type DecisionLoopConfig,
  decideOffline,
  decisionLoopConfigSchema,
  decisionPrompt,
  defaultPosition,
  parseModelDecision,
  type WorldPosition,
} from './decision-loop.js';
import type { AgentRuntimeState } from './events.js';
import { createAgentRetention, defaultRetainedAgentRows } from './retention.js';
import { canAgentTransition } from './state-machine.js';
import './events.js';

/** An agent as spawned at run time or defined in agentd.yaml (name, role, prompt, position, plus a model). */
export const agentConfigSchema = z.object({
  id: z
    .string()
    .regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, 'lowercase letters, digits, - and _, at most 64 characters')
    .optional(),
  name: z.string().min(1).max(100),
  role: z.string().max(500).default(''),
  /** `provider/model`, or a CLI backend (`claude`, `gemini`). */
  model: z.string().min(1).max(200).optional(),
  systemPrompt: z.string().max(20_000).optional(),
  initialContext: z.string().max(20_000).optional(),
  position: z.object({ x: z.number(), y: z.number() }).optional(),
  /** Off unless given: the agent then moves, waits and speaks on its own between messages. */
  decisionLoop: decisionLoopConfigSchema.optional(),
});

export type AgentConfig = z.output<typeof agentConfigSchema>;
export type AgentConfigInput = z.input<typeof agentConfigSchema>;

/** What a turn receives: a message from a person, another agent, a broadcast or a task. */
export interface AgentInboxMessage {
  kind: 'message' | 'broadcast' | 'task';
  from: string;
  content: string;
  taskId?: string;
}

export interface AgentInfo extends AgentConfig {
  id: string;
}

export interface AgentSnapshot {
  id: string;
  name: string;
  role: string;
  state: AgentRuntimeState;
  currentTask: string | null;
  position: WorldPosition;
  /** The model it runs on (`provider/model`); the runtime's default when it was spawned without one. */
  model: string;
  /** Set when the model is a CLI backend (`command/claude` → `claude`). */
  cliBackend: string | null;
  /** The decision loop, when on: its interval and how many model calls its budget has left. */
  autonomy: { intervalMs: number; useModel: boolean; modelCallsLeft: number } | null;
  mailboxDepth: number;
  lastUpdate: number;
}

export interface StateHistoryEntry {
  agentId: string;
  oldState: AgentRuntimeState;
  newState: AgentRuntimeState;
  reason: string | null;
  timestamp: number;
}

export interface ConversationEntry {
  agentId: string;
  timestamp: number;
  sender: string;
  content: string;
  recipient: string | null;
}

export interface AgentTaskRecord {
  id: string;
  agentId: string;
  taskName: string;
  status: 'assigned' | 'in_progress' | 'completed' | 'failed';
  result: string | null;
  createdAt: number;
  completedAt: number | null;
}

export interface CreateAgentRuntimeOptions {
  db: SqlDatabase;
  bus: Bus;
  /** One turn of an agent: the lead wires the engage loop here. Resolves with what the agent says. */
  runTurn: (agent: AgentInfo, message: AgentInboxMessage, signal: AbortSignal) => Promise<string>;
  clock?: Clock;
  idGenerator?: IdGenerator;
  logger?: Logger;
  /** Turns running at once across all agents (model calls are the expensive part). */
  maxConcurrentTurns?: number;
  /** How long an agent may wait in `listening` for a turn slot before it goes back to `idle`. */
  listeningTimeoutMs?: number;
  /** Default grace period of `terminate` before the current turn is aborted. */
  terminateTimeoutMs?: number;
  /** Messages an agent's mailbox holds; a direct message beyond it is refused with QUEUE_FULL. */
  mailboxSize?: number;
  /**
   * Starts that may find a message still unanswered at the head of its agent's mailbox before it is given up
   * (default 3): one whose turns keep being cut short by a crash is dropped (a task fails) rather than
   * crashing every start.
   */
  maxMessageAttempts?: number;
  /** Reported as the model of agents spawned without one. */
  defaultModel?: string;
  /**
   * First wait before writing again what the database refused for now (a full disk, a lost connection);
   * doubles up to `maxWriteRetryMs`. Default 500 ms and 15 s, as memory's.
   */
  writeRetryMs?: number;
  maxWriteRetryMs?: number;
  /** Throws (a UserInputError with a stable code) for a model or CLI backend that cannot be run. */
  checkModel?: (model: string) => void;
  /** One decision by a real model: the reply text, parsed by the decision loop. Needed for `useModel`. */
  decideWithModel?: (agent: AgentInfo, prompt: string, signal: AbortSignal) => Promise<string>;
  /** Randomness of the offline decision rules (tests pass a seeded one). */
  random?: () => number;
  /**
   * Newest rows of `agent_state_history` each agent keeps (default 10,000; 0 keeps all): pruned at `start`
   * and every `retentionIntervalMs` (an hour), `retentionBatchRows` (1,000) a statement.
   */
  retainStateHistoryRows?: number;
  /** Newest rows of `agent_conversations` each agent keeps (default 10,000; 0 keeps all). */
  retainConversationRows?: number;
  /** Newest rows of `agent_tasks` each agent keeps, and every task not yet ended (default 10,000; 0 keeps all). */
  retainTaskRows?: number;
  retentionIntervalMs?: number;
  retentionBatchRows?: number;
}

export interface AgentRuntime {
  /** Loads persisted agents (they survive a restart) and starts their loops. */
  start(): Promise<AgentSnapshot[]>;
  spawn(config: AgentConfigInput): Promise<AgentSnapshot>;
  /** Graceful: the current turn finishes, then the agent stops; forced (aborted) after `timeoutMs`. */
  terminate(id: string, options?: { timeoutMs?: number }): Promise<{ forced: boolean }>;
  /** Delivers to every running agent except the sender; returns how many received it. */
  broadcast(message: { from?: string; content: string }): Promise<{ delivered: number; dropped: number }>;
  send(to: string, message: { from: string; content: string }): Promise<void>;
  assignTask(agentId: string, task: { taskName: string; taskId?: string }): Promise<AgentTaskRecord>;
  /**
   * A state change reported by an outside driver (a UI, a CLI backend speaking ACP: prompt sent →
   * thinking, first chunk → speaking, response → idle). Checked like every transition: a refused one
   * publishes `agent:transition-rejected` and returns false. True means applied in memory and queued for
   * the agent's next batch of writes: `written(id)` says when it is on disk.
   */
  requestTransition(id: string, to: AgentRuntimeState, reason?: string): boolean;
  /** Moves an agent in the world (clamped to its bounds); published as `agent:moved` and persisted. */
  move(id: string, to: WorldPosition, reason?: string): AgentSnapshot;
  getState(id: string): AgentSnapshot;
  listStates(): AgentSnapshot[];
  history(id: string, options?: { limit?: number }): Promise<StateHistoryEntry[]>;
  conversation(id: string, options?: { limit?: number }): Promise<ConversationEntry[]>;
  /** The agent's newest tasks (`limit`, default 1,000), oldest first. */
  tasks(id: string, options?: { limit?: number }): Promise<AgentTaskRecord[]>;
  /** Resolves when the agent is idle with an empty mailbox (tests, benchmarks). */
  whenIdle(id: string): Promise<void>;
  /**
   * Resolves once the agent's changes so far (state, position, conversation) are on disk; at once for an
   * agent not running here. Rejects with STORE_UNAVAILABLE (retryable) while the database refuses them: they
   * are kept, in order, and written by the retry, so a caller may repeat an idempotent change.
   */
  written(id: string): Promise<void>;
  /** Stops every loop without terminating the agents: they come back at the next `start`. */
  close(): Promise<void>;
}

interface AgentRow {
  id: string;
  name: string;
  role: string;
  config: string;
  state: string;
  current_task: string | null;
  updated_at: number;
  position_x: number | null;
  position_y: number | null;
}

/** A message in an agent's mailbox, with its row in `agent_mailbox`. */
interface Mail {
  seq: number;
  message: AgentInboxMessage;
}

/** A message on its way to an agent's mailbox. */
interface Delivery {
  agent: LiveAgent;
  message: AgentInboxMessage;
}

/** One statement of the agents' persisted state, waiting for its batch. */
interface Write {
  sql: string;
  params: SqlValue[];
  /** Its place in the order of writes: a write is on disk once `committedThrough` reaches it. */
  seq: number;
}

interface LiveAgent {
  info: AgentInfo;
  position: WorldPosition;
  decisionTimer: NodeJS.Timeout | undefined;
  deciding: boolean;
  modelCallsLeft: number;
  state: AgentRuntimeState;
  currentTask: string | null;
  lastUpdate: number;
  /** In the order of `seq`: the order the messages were written. */
  mailbox: Mail[];
  /** Places in the mailbox held by messages being written: a full mailbox counts them. */
  arriving: number;
  notify: () => void;
  stopping: boolean;
  /** Stopped by `close()`, not terminated: a turn cut short keeps its message for the next start. */
  closing: boolean;
  /** Aborted when a terminate runs out of patience: ends a wait for a turn slot. */
  stop: AbortController;
  /** From taking a message until its turn ended. */
  busy: boolean;
  turn: AbortController | undefined;
  loop: Promise<void>;
  idleWaiters: Array<() => void>;
  /** Persistence of this agent's changes, in order. */
  writes: Promise<unknown>;
  /** The `seq` of its last write: its changes are on disk once the runtime has committed through it. */
  lastWriteSeq: number;
}

function notFound(id: string): UserInputError {
  return new UserInputError({
    code: ErrorCodes.notFound,
    message: `agent ${id} does not exist or was terminated.`,
  });
}

/**
 * The multi-agent runtime: each agent has a mailbox and its own loop, a checked state machine whose
 * every accepted transition is published (`agent:state`) and persisted (`agent_state_history`), and
 * persisted conversations and tasks. Agents survive a restart.
 */
export function createAgentRuntime(options: CreateAgentRuntimeOptions): AgentRuntime {
  const { db, bus } = options;
  const clock = options.clock ?? systemClock;
  const idGenerator = options.idGenerator ?? createIdGenerator({ now: () => clock.now() });
  const logger = (options.logger ?? silentLogger).child({ component: 'agents' });
  const listeningTimeoutMs = options.listeningTimeoutMs ?? 5_000;
  const terminateTimeoutMs = options.terminateTimeoutMs ?? 5_000;
  const mailboxSize = options.mailboxSize ?? 1_000;
  const maxMessageAttempts = options.maxMessageAttempts ?? 3;
  // Owner of the mailbox rows this runtime writes (`ownerMayBeAlive`).
  const instanceId = openOwner();
  const turnSlots = createSemaphore(options.maxConcurrentTurns ?? 16);
  const random = options.random ?? Math.random;
  const defaultModel = options.defaultModel ?? 'default';
  const agents = new Map<string, LiveAgent>();
  const retention = createAgentRetention({
    db,
    stateHistoryRows: options.retainStateHistoryRows ?? defaultRetainedAgentRows,
    conversationRows: options.retainConversationRows ?? defaultRetainedAgentRows,
    taskRows: options.retainTaskRows ?? defaultRetainedAgentRows,
    intervalMs: options.retentionIntervalMs,
    batchRows: options.retentionBatchRows,
    logger: options.logger,
  });

  /**
   * Writes are batched: everything persisted within one turn of the event loop goes to the database in one
   * transaction (chunks of 500, yielding between them), in order. That keeps a broadcast to a thousand
   * agents from blocking the event loop with thousands of separate synchronous SQLite commits.
   *
   * A chunk the database refuses for now (a full disk, a lost connection: `isStoreUnavailable`) is not
   * dropped: it and every write after it wait in `refused`, go first in the next batch, in order, and a
   * timer (doubling from `writeRetryMs`) tries again when nothing else comes. A write refused for another
   * reason (a defect) is logged and dropped, as retrying it cannot help.
   */
  let writeTail: Promise<void> = Promise.resolve();
  let openBatch: Write[] | undefined;
  const refused = createRefusedWrites<Write>({
    // A batch already waiting takes the refused writes first.
    retry: () => {
      if (!openBatch && refused.kept > 0) void thenWrite(() => writeBatch([]));
    },
    firstRetryMs: options.writeRetryMs ?? 500,
    maxRetryMs: options.maxWriteRetryMs ?? 15_000,
    maxKept: 100_000,
    logger,
    what: 'agent state',
  });
  const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));
  // Writes commit in the order of their `seq`, kept ones first, so one number says what is on disk.
  let queuedSeq = 0;
  let committedThrough = 0;
  // The last chunk dropped for a defect, and the last refusal: what `written` tells a waiter left behind.
  let dropped = { fromSeq: 1, throughSeq: 0, error: undefined as unknown };
  let lastRefusal: unknown;
  const writeBatch = async (batch: Write[]) => {
    const writes = refused.withKept(batch);
    for (let index = 0; index < writes.length; index += 500) {
      if (index > 0) await yieldToEventLoop();
      const chunk = writes.slice(index, index + 500);
      const throughSeq = chunk[chunk.length - 1]!.seq;
      try {
        await db.transaction(async (tx) => {
          for (const write of chunk) await tx.run(write.sql, write.params);
        });
      } catch (error) {
        if (!isStoreUnavailable(error)) {
          logger.error({ err: error, writes: chunk.length }, 'could not persist agent state; dropped');
          dropped = { fromSeq: chunk[0]!.seq, throughSeq, error };
          committedThrough = throughSeq;
          continue;
        }
        lastRefusal = error;
        refused.refuse(writes.slice(index), error);
        return;
      }
      committedThrough = throughSeq;
    }
    refused.written();
  };
  /** Runs `work` after every write queued so far; a failure is logged and the writes after it go on. */
  const thenWrite = (work: () => Promise<void>) => {
    writeTail = writeTail
      .then(work)
      .catch((error) => logger.error({ err: error }, 'could not persist agent state; continuing'));
    return writeTail;
  };
  const persist = (agent: LiveAgent, sql: string, params: SqlValue[]): Promise<void> => {
    if (!openBatch) {
      const batch: Write[] = [];
      openBatch = batch;
      void thenWrite(async () => {
        await yieldToEventLoop();
        openBatch = undefined;
        await writeBatch(batch);
      });
    }
    queuedSeq += 1;
    openBatch.push({ sql, params, seq: queuedSeq });
    agent.writes = writeTail;
    agent.lastWriteSeq = queuedSeq;
    return writeTail;
  };

  const snapshot = (agent: LiveAgent): AgentSnapshot => ({
    id: agent.info.id,
    name: agent.info.name,
    role: agent.info.role,
    state: agent.state,
    currentTask: agent.currentTask,
    position: { ...agent.position },
    model: agent.info.model ?? defaultModel,
    cliBackend: agent.info.model?.startsWith('command/') ? agent.info.model.slice('command/'.length) : null,
    autonomy: agent.info.decisionLoop
      ? {
          intervalMs: agent.info.decisionLoop.intervalMs,
          useModel: agent.info.decisionLoop.useModel,
          modelCallsLeft: agent.modelCallsLeft,
        }
      : null,
    mailboxDepth: agent.mailbox.length,
    lastUpdate: agent.lastUpdate,
  });

  /** A checked transition: refused ones are reported as events and change nothing. */
  const transition = (agent: LiveAgent, to: AgentRuntimeState, reason?: string): boolean => {
    const from = agent.state;
    const agentId = agent.info.id;
    if (!canAgentTransition(from, to)) {
      bus.publish(
        'agent:transition-rejected',
        { agentId, from, to, reason: `${from} → ${to} is not allowed${reason ? ` (${reason})` : ''}` },
        { agentId },
      );
      return false;
    }
    const now = clock.now();
    agent.state = to;
    agent.lastUpdate = now;
    bus.publish('agent:state', { agentId, from, to, ...(reason ? { reason } : {}) }, { agentId });
    void persist(
      agent,
      'INSERT INTO agent_state_history (agent_id, old_state, new_state, reason, timestamp) VALUES (?, ?, ?, ?, ?)',
      [agentId, from, to, reason ?? null, now],
    );
    void persist(agent, 'UPDATE agents SET state = ?, current_task = ?, updated_at = ? WHERE id = ?', [
      to,
      agent.currentTask,
      now,
      agentId,
    ]);
    return true;
  };

  const recordConversation = (agent: LiveAgent, sender: string, content: string, recipient: string | null) =>
    persist(
      agent,
      'INSERT INTO agent_conversations (agent_id, timestamp, sender, content, recipient) VALUES (?, ?, ?, ?, ?)',
      [agent.info.id, clock.now(), sender, content, recipient],
    );

  const setTaskStatus = (
    agent: LiveAgent,
    taskId: string,
    status: AgentTaskRecord['status'],
    result?: string,
  ) =>
    persist(agent, 'UPDATE agent_tasks SET status = ?, result = ?, completed_at = ? WHERE id = ?', [
      status,
      result ?? null,
      status === 'completed' || status === 'failed' ? clock.now() : null,
      taskId,
    ]);

  /** A task ends the same way whether it succeeded or failed: its row is settled and one event says how. */
  const finishTask = (agent: LiveAgent, taskId: string, status: 'completed' | 'failed', result: string) => {
    void setTaskStatus(agent, taskId, status, result);
    const agentId = agent.info.id;
    bus.publish('agent:task-completed', { agentId, taskId, result, status }, { agentId });
  };

  const nextMessage = (agent: LiveAgent): Promise<Mail | undefined> =>
    new Promise((resolve) => {
      const check = () => {
        if (agent.stopping) resolve(undefined);
        else if (agent.mailbox.length > 0) {
          agent.busy = true;
          resolve(agent.mailbox.shift());
        } else agent.notify = check;
      };
      check();
    });

  /**
   * Waits for a turn slot in `listening`. After the timeout the agent goes back to `idle` and keeps waiting
   * there (idle → thinking is allowed), so no agent stays in `listening` however busy the runtime is.
   */
  const acquireTurnSlot = async (agent: LiveAgent): Promise<() => void> => {
    const timer = setTimeout(() => {
      if (agent.state === 'listening') transition(agent, 'idle', 'listening timeout: no turn slot yet');
    }, listeningTimeoutMs);
    try {
      return await turnSlots.acquire(agent.stop.signal);
    } finally {
      clearTimeout(timer);
    }
  };

  const settleIdle = (agent: LiveAgent) => {
    if (agent.busy || agent.mailbox.length > 0) return;
    for (const resolve of agent.idleWaiters.splice(0)) resolve();
  };

  const runLoop = async (agent: LiveAgent) => {
    for (;;) {
      const mail = await nextMessage(agent);
      if (!mail) break;
      const { message } = mail;
      // One turn per event-loop turn at most: instant turns must not starve timers and I/O.
      await yieldToEventLoop();
      const agentId = agent.info.id;
      if (agent.state === 'idle') transition(agent, 'listening', `${message.kind} from ${message.from}`);
      let release: () => void;
      try {
        release = await acquireTurnSlot(agent);
      } catch {
        break;
      }
      const controller = new AbortController();
      agent.turn = controller;
      // A turn that `close()` cut short keeps its message for the next start; any other turn ends it.
      let keepMail = false;
      try {
        if (message.taskId) {
          agent.currentTask = message.content;
          void setTaskStatus(agent, message.taskId, 'in_progress');
        }
        transition(agent, 'thinking', message.taskId ? `task ${message.taskId}` : undefined);
        const reply = await options.runTurn(agent.info, message, controller.signal);
        if (controller.signal.aborted) throw controller.signal.reason ?? new Error('aborted');
        const content = reply.trim();
        if (content) {
          transition(agent, 'speaking');
          const recipient = message.kind === 'message' ? message.from : null;
          void recordConversation(agent, agentId, content, recipient);
          bus.publish('agent:spoke', { agentId, content, ...(recipient ? { recipient } : {}) }, { agentId });
        }
        if (message.taskId) finishTask(agent, message.taskId, 'completed', content);
        agent.currentTask = null;
        transition(agent, 'idle');
      } catch (error) {
        keepMail = agent.closing && controller.signal.aborted;
        const text = error instanceof Error ? error.message : String(error);
        transition(agent, 'error', text.slice(0, 300));
        if (message.taskId && !keepMail) finishTask(agent, message.taskId, 'failed', text);
        agent.currentTask = null;
        transition(agent, 'idle', 'recovered from error');
      } finally {
        if (!keepMail) void persist(agent, 'DELETE FROM agent_mailbox WHERE seq = ?', [mail.seq]);
        agent.turn = undefined;
        agent.busy = false;
        release();
        settleIdle(agent);
      }
    }
    agent.busy = false;
    settleIdle(agent);
  };

  const moveAgent = (agent: LiveAgent, target: WorldPosition, reason?: string) => {
    const from = agent.position;
    const to = clampToWorld(target);
    if (from.x === to.x && from.y === to.y) return;
    agent.position = to;
    agent.lastUpdate = clock.now();
    const agentId = agent.info.id;
    bus.publish('agent:moved', { agentId, from, to, ...(reason ? { reason } : {}) }, { agentId });
    void persist(agent, 'UPDATE agents SET position_x = ?, position_y = ?, updated_at = ? WHERE id = ?', [
      to.x,
      to.y,
      agent.lastUpdate,
      agentId,
    ]);
  };

  /** Speech of its own: the agent thinks, speaks and is idle again, like a turn without a model call. */
  const speakUnprompted = (agent: LiveAgent, content: string) => {
    const agentId = agent.info.id;
    if (!transition(agent, 'thinking', 'decision loop')) return;
    transition(agent, 'speaking');
    void recordConversation(agent, agentId, content, null);
    bus.publish('agent:spoke', { agentId, content }, { agentId });
    transition(agent, 'idle');
  };

  const decide = async (agent: LiveAgent, loop: DecisionLoopConfig): Promise<Decision> => {
    if (loop.useModel && options.decideWithModel && agent.modelCallsLeft > 0) {
      agent.modelCallsLeft--;
      const prompt = decisionPrompt({
        name: agent.info.name,
        role: agent.info.role,
        position: agent.position,
      });
      const reply = await options.decideWithModel(agent.info, prompt, agent.stop.signal);
      return parseModelDecision(reply, agent.position, loop.maxStep);
    }
    return decideOffline({ position: agent.position, maxStep: loop.maxStep, random });
  };

  /** One tick of the decision loop; skipped while the agent is busy with its mailbox or still deciding. */
  const decisionTick = async (agent: LiveAgent, loop: DecisionLoopConfig) => {
    if (agent.deciding || agent.stopping || agent.busy || agent.mailbox.length > 0 || agent.state !== 'idle')
      return;
    agent.deciding = true;
    try {
      const decision = await decide(agent, loop);
      if (agent.stopping || agent.busy || agent.state !== 'idle') return;
      const agentId = agent.info.id;
      bus.publish('agent:decided', { agentId, action: decision.action }, { agentId });
      if (decision.action === 'move') moveAgent(agent, decision.to, 'decision loop');
      else if (decision.action === 'speak') speakUnprompted(agent, decision.content);
    } catch (error) {
      logger.warn({ err: error, agentId: agent.info.id }, 'a decision of the agent failed; it waits');
    } finally {
      agent.deciding = false;
    }
  };

  const launch = (
    info: AgentInfo,
    state: AgentRuntimeState,
    lastUpdate: number,
    position: WorldPosition,
  ): LiveAgent => {
    const agent: LiveAgent = {
      info,
      position,
      decisionTimer: undefined,
      deciding: false,
      modelCallsLeft: info.decisionLoop?.maxModelCalls ?? 0,
      state,
      currentTask: null,
      lastUpdate,
      mailbox: [],
      arriving: 0,
      notify: () => undefined,
      stopping: false,
      closing: false,
      stop: new AbortController(),
      busy: false,
      turn: undefined,
      loop: Promise.resolve(),
      idleWaiters: [],
      writes: Promise.resolve(),
      lastWriteSeq: 0,
    };
    agents.set(info.id, agent);
    agent.loop = runLoop(agent);
    const loop = info.decisionLoop;
    if (loop) {
      agent.decisionTimer = setInterval(() => void decisionTick(agent, loop), loop.intervalMs);
      agent.decisionTimer.unref?.();
    }
    return agent;
  };

  /** Whether the agent takes one more message, counting those still being written. */
  const hasRoom = (agent: LiveAgent) =>
    !agent.stopping && agent.mailbox.length + agent.arriving < mailboxSize;

  /** Puts a written message in the mailbox in RAM, in the order of the writes, and wakes the agent. */
  const putInMailbox = (agent: LiveAgent, mail: Mail) => {
    const { mailbox } = agent;
    // On SQLite one agent's writes commit in order; on Postgres two may commit out of it.
    let at = mailbox.length;
    while (at > 0 && mailbox[at - 1]!.seq > mail.seq) at--;
    mailbox.splice(at, 0, mail);
    const wake = agent.notify;
    agent.notify = () => undefined;
    wake();
  };

  const mailChunk = 100;
  /**
   * The mailbox rows of `deliveries` (one agent each) and their conversation rows, in chunks of 100; each
   * agent's mailbox row `seq`.
   */
  const insertMail = async (
    tx: SqlExecutor,
    deliveries: ReadonlyArray<Delivery>,
    now: number,
  ): Promise<Map<string, number>> => {
    const seqs = new Map<string, number>();
    for (let index = 0; index < deliveries.length; index += mailChunk) {
      // A broadcast to many agents holds the event loop a chunk at a time (about 2 ms), not for all of them.
      if (index > 0) await yieldToEventLoop();
      const chunk = deliveries.slice(index, index + mailChunk);
      const params: SqlValue[] = [];
      const said: SqlValue[] = [];
      for (const { agent, message } of chunk) {
        const agentId = agent.info.id;
        params.push(
          agentId,
          message.kind,
          message.from,
          message.content,
          message.taskId ?? null,
          instanceId,
          now,
        );
        said.push(agentId, now, message.from, message.content, agentId);
      }
      const rows = await tx.all<{ seq: number; agent_id: string }>(
        `INSERT INTO agent_mailbox (agent_id, kind, sender, content, task_id, owner, created_at) VALUES ${sqlValueRows(chunk.length, 7)} RETURNING seq, agent_id`,
        params,
      );
      for (const row of rows) seqs.set(row.agent_id, Number(row.seq));
      await tx.run(
        `INSERT INTO agent_conversations (agent_id, timestamp, sender, content, recipient) VALUES ${sqlValueRows(chunk.length, 5)}`,
        said,
      );
    }
    return seqs;
  };

  /**
   * Writes the messages to the agents' mailboxes and conversations on disk in one transaction (with
   * `alsoInTransaction`'s writes), and only then puts them in the mailboxes in RAM: a send is acknowledged
   * once a crash cannot lose it, and a write the database refuses (a full disk) fails the send and leaves
   * nothing anywhere. The caller checked that each agent has room.
   */
  const deliver = async (
    deliveries: ReadonlyArray<Delivery>,
    alsoInTransaction?: (tx: SqlExecutor) => Promise<unknown>,
  ): Promise<void> => {
    for (const { agent } of deliveries) agent.arriving++;
    let seqs: Map<string, number>;
    try {
      const now = clock.now();
      seqs = await db.transaction(
        async (tx) => {
          await alsoInTransaction?.(tx);
          return await insertMail(tx, deliveries, now);
        },
        { ambient: false },
      );
    } finally {
      for (const { agent } of deliveries) agent.arriving--;
    }
    for (const { agent, message } of deliveries) {
      const seq = seqs.get(agent.info.id)!;
      // Terminated while the message was written: its mailbox is gone, and so is the row.
      if (agent.stopping && !agent.closing)
        void persist(agent, 'DELETE FROM agent_mailbox WHERE seq = ?', [seq]);
      else putInMailbox(agent, { seq, message });
    }
  };

  /**
   * What `start()` puts back in the mailboxes of the agents it started: messages no turn has finished, of
   * processes that are gone (`ownerMayBeAlive`): another process that runs agents on the same database, such
   * as `agentd mcp` beside `agentd serve`, leaves a live server's messages to it. An agent answers its
   * messages one at a time, in order, so only its first can have had a turn cut short: that one's `attempts`
   * counts the starts that found it first, written before it runs again, and at `maxMessageAttempts` it is
   * given up (a message that brings the process down every time must not stop its agent for good). Counted
   * at a start, not at each turn: no statement is added to every message's path.
   */
  const reloadMailboxes = async (started: ReadonlySet<string>) => {
    const rows = await db.all<{
      seq: number;
      agent_id: string;
      kind: string;
      sender: string;
      content: string;
      task_id: string | null;
      owner: string;
      attempts: number;
    }>(
      'SELECT seq, agent_id, kind, sender, content, task_id, owner, attempts FROM agent_mailbox ORDER BY seq',
    );
    // The started agents' rows whose process is gone; a live process's are in its own mailboxes, in RAM.
    const orphaned = new Map<string, number[]>();
    for (const row of rows) {
      if (!started.has(row.agent_id) || row.owner === instanceId || ownerMayBeAlive(row.owner)) continue;
      const seqs = orphaned.get(row.owner) ?? [];
      seqs.push(Number(row.seq));
      orphaned.set(row.owner, seqs);
    }
    // Taken over only from the owner they were read with: of two processes starting at once, one takes each.
    const taken = new Set<number>();
    for (const [owner, seqs] of orphaned)
      for (let index = 0; index < seqs.length; index += 500) {
        const chunk = seqs.slice(index, index + 500);
        const moved = await db.all<{ seq: number }>(
          `UPDATE agent_mailbox SET owner = ? WHERE owner = ? AND seq IN (${sqlPlaceholders(chunk.length)}) RETURNING seq`,
          [instanceId, owner, ...chunk],
        );
        for (const row of moved) taken.add(Number(row.seq));
      }
    const mine = rows.filter((row) => taken.has(Number(row.seq)) && agents.has(row.agent_id));
    const firstOf = new Map<string, number>();
    for (const row of mine) if (!firstOf.has(row.agent_id)) firstOf.set(row.agent_id, Number(row.seq));
    const firsts = [...firstOf.values()];
    for (let index = 0; index < firsts.length; index += 500) {
      const chunk = firsts.slice(index, index + 500);
      await db.run(
        `UPDATE agent_mailbox SET attempts = attempts + 1 WHERE seq IN (${sqlPlaceholders(chunk.length)})`,
        chunk,
      );
    }
    for (const row of mine) {
      const agent = agents.get(row.agent_id)!;
      const seq = Number(row.seq);
      const message: AgentInboxMessage = {
        kind: row.kind as AgentInboxMessage['kind'],
        from: row.sender,
        content: row.content,
        ...(row.task_id !== null ? { taskId: row.task_id } : {}),
      };
      const attempts = Number(row.attempts) + (firstOf.get(row.agent_id) === seq ? 1 : 0);
      if (attempts >= maxMessageAttempts) {
        logger.warn(
          { agentId: row.agent_id, kind: message.kind, attempts },
          'giving up on a message whose turns were cut short',
        );
        void persist(agent, 'DELETE FROM agent_mailbox WHERE seq = ?', [seq]);
        if (message.taskId)
          finishTask(agent, message.taskId, 'failed', `its turn was cut short ${attempts} times`);
        continue;
      }
      putInMailbox(agent, { seq, message });
    }
  };

  /** The agent's changes so far written (or kept after a refusal); at once for an agent not running here. */
  const writtenSoFar = async (id: string): Promise<void> => {
    await agents.get(id)?.writes;
  };

  /** The agent's changes so far on disk, or an error saying why they are not. */
  const onDisk = async (id: string): Promise<void> => {
    const agent = agents.get(id);
    if (!agent) return;
    const seq = agent.lastWriteSeq;
    await agent.writes;
    if (seq >= dropped.fromSeq && seq <= dropped.throughSeq) {
      throw new SystemError({
        code: ErrorCodes.internal,
        message: `agent ${id}'s last change could not be written and was dropped`,
        cause: dropped.error,
      });
    }
    if (seq > committedThrough) {
      throw new SystemError({
        code: ErrorCodes.storeUnavailable,
        message: `agent ${id}'s last change is not on disk: the database refuses writes for now; it is kept and written when the database takes it`,
        retryable: true,
        cause: lastRefusal,
        details: { agentId: id },
      });
    }
  };

  const live = (id: string): LiveAgent => {
    const agent = agents.get(id);
    if (!agent) throw notFound(id);
    return agent;
  };

  const stopAgent = async (agent: LiveAgent, timeoutMs: number): Promise<boolean> => {
    agent.stopping = true;
    clearInterval(agent.decisionTimer);
    const wake = agent.notify;
    agent.notify = () => undefined;
    wake();
    let forced = false;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), timeoutMs);
    });
    const outcome = await Promise.race([agent.loop.then(() => 'done' as const), timedOut]);
    if (outcome === 'timeout') {
      forced = true;
      agent.stop.abort();
      agent.turn?.abort(new UserInputError({ code: ErrorCodes.aborted, message: 'agent terminated' }));
      // A turn that ignores its signal is abandoned rather than waited for.
      await Promise.race([
        agent.loop,
        new Promise((resolve) => setTimeout(resolve, Math.min(timeoutMs, 1_000))),
      ]);
    }
    clearTimeout(timer);
    await agent.writes;
    return forced;
  };

  return {
    async start() {
      const rows = await db.all<AgentRow>(
        "SELECT id, name, role, config, state, current_task, updated_at, position_x, position_y FROM agents WHERE status = 'active' ORDER BY created_at, id",
      );
      const started: AgentSnapshot[] = [];
      const startedIds = new Set<string>();
      for (const row of rows) {
        if (agents.has(row.id)) continue;
        const parsed = agentConfigSchema.safeParse(JSON.parse(row.config));
        if (!parsed.success) {
          logger.warn(
            { agentId: row.id },
            'skipping a persisted agent whose configuration no longer validates',
          );
          continue;
        }
        const info = { ...parsed.data, id: row.id };
        const agent = launch(
          info,
          row.state as AgentRuntimeState,
          Number(row.updated_at),
          row.position_x !== null && row.position_y !== null
            ? { x: Number(row.position_x), y: Number(row.position_y) }
            : (info.position ?? defaultPosition(row.id)),
        );
        // A turn cut short by the restart is over: the agent starts again from idle, and takes its message again.
        if (agent.state !== 'idle') transition(agent, 'idle', 'restarted');
        startedIds.add(row.id);
      }
      await reloadMailboxes(startedIds);
      for (const id of startedIds) started.push(snapshot(agents.get(id)!));
      retention.start();
      return started;
    },
    async spawn(input) {
      const parsed = agentConfigSchema.safeParse(input);
      if (!parsed.success) {
        throw new UserInputError({
          code: ErrorCodes.invalidRequest,
          message: `invalid agent configuration: ${parsed.error.issues.map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`).join('; ')}`,
        });
      }
      const config = parsed.data;
      if (config.model) options.checkModel?.(config.model);
      const id = config.id ?? idGenerator('agent');
      if (agents.has(id))
        throw new UserInputError({ code: ErrorCodes.conflict, message: `agent ${id} is already running.` });
      const now = clock.now();
      const info: AgentInfo = { ...config, id };
      const position = clampToWorld(config.position ?? defaultPosition(id));
      await db.run(
        `INSERT INTO agents (id, name, role, config, state, status, created_at, updated_at, position_x, position_y) VALUES (?, ?, ?, ?, 'idle', 'active', ?, ?, ?, ?)
         ON CONFLICT (id) DO UPDATE SET name = excluded.name, role = excluded.role, config = excluded.config, state = 'idle',
           status = 'active', updated_at = excluded.updated_at, terminated_at = NULL,
           position_x = excluded.position_x, position_y = excluded.position_y`,
        [id, info.name, info.role, JSON.stringify(info), now, now, position.x, position.y],
      );
      const agent = launch(info, 'idle', now, position);
      bus.publish('agent:spawned', { agentId: id, name: info.name, role: info.role }, { agentId: id });
      return snapshot(agent);
    },
    async terminate(id, terminateOptions = {}) {
      const agent = live(id);
      const forced = await stopAgent(agent, terminateOptions.timeoutMs ?? terminateTimeoutMs);
      agents.delete(id);
      const now = clock.now();
      // What was still in the mailbox goes with the agent; its tasks fail.
      try {
        await db.transaction(
          async (tx) => {
            await tx.run(
              "UPDATE agents SET status = 'terminated', state = 'idle', terminated_at = ?, updated_at = ? WHERE id = ?",
              [now, now, id],
            );
            await tx.run('DELETE FROM agent_mailbox WHERE agent_id = ?', [id]);
            await tx.run(
              "UPDATE agent_tasks SET status = 'failed', result = 'agent terminated', completed_at = ? WHERE agent_id = ? AND status IN ('assigned', 'in_progress')",
              [now, id],
            );
          },
          { ambient: false },
        );
      } catch (error) {
        // Nothing was written, so the agent is not terminated: it runs on with what its mailbox held, and
        // the caller's retry finds it rather than NOT_FOUND (which would read as already gone).
        const revived = launch(agent.info, agent.state, agent.lastUpdate, agent.position);
        revived.modelCallsLeft = agent.modelCallsLeft;
        for (const mail of agent.mailbox) putInMailbox(revived, mail);
        throw error;
      }
      for (const { message } of agent.mailbox.splice(0))
        if (message.taskId)
          bus.publish(
            'agent:task-completed',
            { agentId: id, taskId: message.taskId, result: 'agent terminated', status: 'failed' },
            { agentId: id },
          );
      bus.publish('agent:terminated', { agentId: id, forced }, { agentId: id });
      return { forced };
    },
    async broadcast(message) {
      const from = message.from ?? 'system';
      const deliveries: Delivery[] = [];
      let dropped = 0;
      for (const agent of agents.values()) {
        if (agent.info.id === from) continue;
        if (hasRoom(agent))
          deliveries.push({ agent, message: { kind: 'broadcast', from, content: message.content } });
        else dropped++;
      }
      if (deliveries.length > 0) await deliver(deliveries);
      bus.publish('agent:broadcast', { agentId: from, data: message.content }, {});
      return { delivered: deliveries.length, dropped };
    },
    async send(to, message) {
      const agent = live(to);
      if (!hasRoom(agent)) {
        throw new UserInputError({
          code: ErrorCodes.queueFull,
          message: `agent ${to}'s mailbox is full (${mailboxSize} messages); try again later.`,
          retryable: true,
        });
      }
      await deliver([{ agent, message: { kind: 'message', from: message.from, content: message.content } }]);
      bus.publish('agent:message', { from: message.from, to, content: message.content }, { agentId: to });
    },
    async assignTask(agentId, task) {
      const agent = live(agentId);
      const record: AgentTaskRecord = {
        id: task.taskId ?? idGenerator('task'),
        agentId,
        taskName: task.taskName,
        status: 'assigned',
        result: null,
        createdAt: clock.now(),
        completedAt: null,
      };
      // A task id the caller chose may be taken: that is their CONFLICT, not the database's constraint error.
      const insertTask =
        'INSERT INTO agent_tasks (id, agent_id, task_name, status, result, created_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING';
      const taken = () =>
        new UserInputError({
          code: ErrorCodes.conflict,
          message: `a task with id ${record.id} already exists.`,
        });
      if (!hasRoom(agent)) {
        const inserted = await db.run(insertTask, [
          record.id,
          agentId,
          record.taskName,
          'failed',
          'mailbox full',
          record.createdAt,
        ]);
        if (inserted.changes === 0) throw taken();
        throw new UserInputError({
          code: ErrorCodes.queueFull,
          message: `agent ${agentId}'s mailbox is full.`,
          retryable: true,
        });
      }
      // The task and its message are written together: neither is there without the other.
      await deliver(
        [{ agent, message: { kind: 'task', from: 'system', content: task.taskName, taskId: record.id } }],
        async (tx) => {
          const inserted = await tx.run(insertTask, [
            record.id,
            agentId,
            record.taskName,
            record.status,
            null,
            record.createdAt,
          ]);
          if (inserted.changes === 0) throw taken();
        },
      );
      bus.publish(
        'agent:task-assigned',
        { agentId, taskId: record.id, taskName: record.taskName },
        { agentId },
      );
      return record;
    },
    requestTransition: (id, to, reason) => transition(live(id), to, reason),
    move(id, to, reason) {
      const agent = live(id);
      moveAgent(agent, to, reason);
      return snapshot(agent);
    },
    getState: (id) => snapshot(live(id)),
    listStates: () => [...agents.values()].map(snapshot),
    async history(id, historyOptions = {}) {
      await writtenSoFar(id);
      const rows = await db.all<{
        agent_id: string;
        old_state: string;
        new_state: string;
        reason: string | null;
        timestamp: number;
      }>(
        'SELECT agent_id, old_state, new_state, reason, timestamp FROM agent_state_history WHERE agent_id = ? ORDER BY id DESC LIMIT ?',
        [id, historyOptions.limit ?? 1_000],
      );
      return rows.reverse().map((row) => ({
        agentId: row.agent_id,
        oldState: row.old_state as AgentRuntimeState,
        newState: row.new_state as AgentRuntimeState,
        reason: row.reason,
        timestamp: Number(row.timestamp),
      }));
    },
    async conversation(id, conversationOptions = {}) {
      await writtenSoFar(id);
      const rows = await db.all<{
        agent_id: string;
        timestamp: number;
        sender: string;
        content: string;
        recipient: string | null;
      }>(
        'SELECT agent_id, timestamp, sender, content, recipient FROM agent_conversations WHERE agent_id = ? ORDER BY id DESC LIMIT ?',
        [id, conversationOptions.limit ?? 1_000],
      );
      return rows
        .reverse()
        .map((row) => ({ ...row, agentId: row.agent_id, timestamp: Number(row.timestamp) }));
    },
    async tasks(id, tasksOptions = {}) {
      await writtenSoFar(id);
      const rows = await db.all<{
        id: string;
        agent_id: string;
        task_name: string;
        status: string;
        result: string | null;
        created_at: number;
        completed_at: number | null;
      }>(
        'SELECT id, agent_id, task_name, status, result, created_at, completed_at FROM agent_tasks WHERE agent_id = ? ORDER BY created_at DESC, id DESC LIMIT ?',
        [id, tasksOptions.limit ?? 1_000],
      );
      return rows.reverse().map((row) => ({
        id: row.id,
        agentId: row.agent_id,
        taskName: row.task_name,
        status: row.status as AgentTaskRecord['status'],
        result: row.result,
        createdAt: Number(row.created_at),
        completedAt: row.completed_at === null ? null : Number(row.completed_at),
      }));
    },
    whenIdle(id) {
      const agent = live(id);
      return new Promise<void>((resolve) => {
        agent.idleWaiters.push(resolve);
        settleIdle(agent);
      }).then(() => agent.writes.then(() => undefined));
    },
    written: onDisk,
    async close() {
      closeOwner(instanceId);
      await retention.stop();
      const all = [...agents.values()];
      agents.clear();
      for (const agent of all) agent.closing = true;
      await Promise.all(all.map((agent) => stopAgent(agent, terminateTimeoutMs)));
      // One last try for what the database refused; what it still refuses is lost, and said so.
      refused.stop();
      if (refused.kept > 0) await thenWrite(() => writeBatch([]));
      refused.giveUp();
    },
  };
}
