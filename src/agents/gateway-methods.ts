import { z } from 'zod';
import { defineTool, type ToolDefinition } from '../tools/index.js';
import { ErrorCodes, formatZodIssues, UserInputError } from '../util/index.js';
import type { Heartbeat } from './heartbeat.js';
import { type Planner, synthesisEvent } from './planner.js';
import type { WorkerPool } from './pool.js';
import {
  type AgentConfigInput,
  type AgentRuntime,
  type AgentSnapshot,
  agentConfigSchema,
} from './runtime.js';

/** The world's `agent_spawn_request` as it arrives on the flat protocol. */
export const agentSpawnRequestSchema = z.object({
  type: z.literal('agent_spawn_request'),
  agent_config: z.object({
    name: z.string().min(1).max(100),
    role: z.string().max(500).default(''),
    cli_backend: z.string().min(1).max(100).optional(),
    initial_position: z.object({ x: z.number(), y: z.number() }).optional(),
    system_prompt: z.string().max(20_000).optional(),
    initial_context: z.string().max(20_000).optional(),
  }),
});

export type AgentSpawnRequest = z.input<typeof agentSpawnRequestSchema>;

/** Maps the snake_case spawn request onto an agent configuration. */
export function agentConfigFromSpawnRequest(
  request: z.output<typeof agentSpawnRequestSchema>,
): AgentConfigInput {
  const config = request.agent_config;
  return {
    name: config.name,
    role: config.role,
    ...(config.cli_backend ? { model: `command/${config.cli_backend}` } : {}),
    ...(config.initial_position ? { position: config.initial_position } : {}),
    ...(config.system_prompt ? { systemPrompt: config.system_prompt } : {}),
    ...(config.initial_context ? { initialContext: config.initial_context } : {}),
  };
}

/** The `agent_state_update` frame for an agent snapshot. */
export function toAgentStateUpdate(agent: AgentSnapshot): {
  type: 'agent_state_update';
  agent_id: string;
  state: string;
  position: { x: number; y: number };
  current_task: string | null;
} {
  return {
    type: 'agent_state_update',
    agent_id: agent.id,
    state: agent.state,
    position: agent.position,
    current_task: agent.currentTask,
  };
}

/** The `agent_speech` frame for an `agent:spoke` event. */
export function toAgentSpeech(event: { agentId: string; content: string; recipient?: string }): {
  type: 'agent_speech';
  agent_id: string;
  content: string;
  recipients: string[];
} {
  return {
    type: 'agent_speech',
    agent_id: event.agentId,
    content: event.content,
    recipients: event.recipient ? [event.recipient] : [],
  };
}

/**
 * `agents.spawn` params in camelCase: the agent configuration plus the flat protocol's spawn fields under their camelCase
 * names (`cliBackend`, `initialPosition`), which the Spiderweb adapter passes through.
 */
export const agentSpawnParamsSchema = agentConfigSchema.extend({
  cliBackend: z
    .string()
    .regex(/^[a-z0-9][a-z0-9_.-]{0,63}$/, 'a CLI backend name such as claude or gemini')
    .optional(),
  initialPosition: z.object({ x: z.number(), y: z.number() }).optional(),
});

export const agentsSpawnParamsSchema = z.union([agentSpawnParamsSchema, agentSpawnRequestSchema]);

/** Maps camelCase spawn params onto an agent configuration; a CLI backend runs as `command/<backend>`. */
export function agentConfigFromSpawnParams(
  params: z.output<typeof agentSpawnParamsSchema>,
): AgentConfigInput {
  const { cliBackend, initialPosition, ...config } = params;
  if (cliBackend && config.model && config.model !== `command/${cliBackend}`) {
    throw new UserInputError({
      code: ErrorCodes.invalidRequest,
      message: `give either model or cliBackend, not both (${config.model} vs ${cliBackend}).`,
    });
  }
  const position = config.position ?? initialPosition;
  return {
    ...config,
    ...(cliBackend ? { model: `command/${cliBackend}` } : {}),
    ...(position ? { position } : {}),
  };
}
/** An agent's id as a caller names it: at most 64 characters at spawn, so a longer one names no agent. */
const agentIdParam = z.string().min(1).max(64);
/**
 * A key the caller chooses, bounded as the gateway bounds session keys (session-key.ts): safe to log and to
 * write into events and work items.
 */
const callerKeyParam = (what: string) =>
  z
    .string()
    .min(1)
    .max(256)
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what is refused
    .refine((key) => !/[\u0000-\u001f\u007f]/.test(key), `${what} has no control characters`);
const sessionKeyParam = callerKeyParam('a session key');
/** Work item ids one control call may name: each is a parameter of one statement. */
const workItemIdsParam = z.array(z.string().min(1).max(128)).max(1_000);

export const agentsTerminateParamsSchema = z.object({
  agentId: agentIdParam,
  timeoutMs: z.number().int().min(0).max(600_000).optional(),
});
export const agentsListParamsSchema = z.object({}).passthrough();
export const agentsStateParamsSchema = z.object({ agentId: agentIdParam });
export const agentBroadcastParamsSchema = z.object({
  content: z.string().min(1).max(20_000),
  // Written to every agent's mailbox and conversation: unbounded, one frame would be written a thousand times.
  from: z.string().min(1).max(128).optional(),
});
export const agentMessageParamsSchema = z.object({
  agentId: agentIdParam,
  content: z.string().min(1).max(20_000),
  /** Who is speaking; a person at a client by default. */
  from: z.string().min(1).max(128).default('user'),
});
export const agentAssignParamsSchema = z.object({
  agentId: agentIdParam,
  task: z.string().min(1).max(20_000),
  taskId: z.string().min(1).max(128).optional(),
});
export const agentRecordsParamsSchema = z.object({
  agentId: agentIdParam,
  limit: z.number().int().min(1).max(1_000).default(200),
});
export const agentMoveParamsSchema = z.object({
  agentId: agentIdParam,
  x: z.number().finite(),
  y: z.number().finite(),
});
export const agentControlParamsSchema = z.discriminatedUnion('action', [
  z.object({
    action: z.literal('goal'),
    goal: z.string().min(1).max(20_000),
    sessionKey: sessionKeyParam,
    agentId: agentIdParam.default('main'),
    // Also written into each task's params, which is what answers a retry after a restart.
    idempotencyKey: callerKeyParam('an idempotency key').optional(),
  }),
  z.object({
    action: z.literal('pause'),
    sessionKey: sessionKeyParam,
    ids: workItemIdsParam.optional(),
  }),
  z.object({
    action: z.literal('resume'),
    sessionKey: sessionKeyParam,
    ids: workItemIdsParam.optional(),
  }),
  z.object({
    action: z.literal('cancel'),
    sessionKey: sessionKeyParam,
    ids: workItemIdsParam.optional(),
  }),
  z.object({ action: z.literal('state'), sessionKey: sessionKeyParam }),
  z.object({ action: z.literal('status'), sessionKey: sessionKeyParam }),
  z.object({ action: z.literal('heartbeat'), sessionKey: sessionKeyParam }),
  z.object({ action: z.literal('plan'), sessionKey: sessionKeyParam }),
]);

/** What a method may do on the calling connection (the gateway's method context). */
export interface AgentCallerConnection {
  sendEvent(event: string, payload: unknown): void;
  /** Aborted when the connection closes. */
  signal: AbortSignal;
}

export interface AgentGatewayMethod<Schema extends z.ZodType = z.ZodType> {
  params: Schema;
  handler(params: unknown, caller?: AgentCallerConnection): Promise<unknown>;
}

export interface CreateAgentGatewayMethodsOptions {
  runtime: AgentRuntime;
  /** Needed for `agent.control`; without planner and pool that method is not offered. */
  planner?: Planner;
  pool?: WorkerPool;
  /** For `agent.control {action:"heartbeat"}`: a sweep now. Without it the action says the heartbeat is off. */
  heartbeat?: Pick<Heartbeat, 'sweep'>;
}

/** The agent that short session keys (`main`) belong to. */
const defaultAgentId = 'main';

function parse<Schema extends z.ZodType>(schema: Schema, params: unknown): z.output<Schema> {
  const result = schema.safeParse(params ?? {});
  if (!result.success) {
    throw new UserInputError({
      code: ErrorCodes.invalidRequest,
      message: `invalid params: ${formatZodIssues(result.error.issues)}`,
    });
  }
  return result.data;
}

/**
 * Plain handlers (params validated with zod) for the gateway's `agents.spawn|terminate|list|state`,
 * `agent.broadcast` and `agent.control` methods. The gateway registers them; this module never imports it.
 */
export function createAgentGatewayMethods(
  options: CreateAgentGatewayMethodsOptions,
): Record<string, AgentGatewayMethod> {
  const { runtime, planner, pool, heartbeat } = options;
  const methods: Record<string, AgentGatewayMethod> = {
    'agents.spawn': {
      params: agentsSpawnParamsSchema,
      async handler(raw) {
        const params = parse(agentsSpawnParamsSchema, raw);
        const config =
          'type' in params ? agentConfigFromSpawnRequest(params) : agentConfigFromSpawnParams(params);
        const agent = await runtime.spawn(config);
        return { agentId: agent.id, agent };
      },
    },
    'agents.terminate': {
      params: agentsTerminateParamsSchema,
      async handler(raw) {
        const params = parse(agentsTerminateParamsSchema, raw);
        const result = await runtime.terminate(
          params.agentId,
          params.timeoutMs !== undefined ? { timeoutMs: params.timeoutMs } : {},
        );
        return { agentId: params.agentId, terminated: true, forced: result.forced };
      },
    },
    'agents.list': {
      params: agentsListParamsSchema,
      async handler() {
        // OpenClaw clients also read who the default agent is and how session keys are scoped; `kind`
        // tells them these are agents to chat with.
        return {
          defaultId: defaultAgentId,
          mainKey: 'main',
          scope: 'per-sender',
          agents: runtime.listStates().map((agent) => ({ ...agent, kind: 'agent' })),
        };
      },
    },
    'agents.state': {
      params: agentsStateParamsSchema,
      async handler(raw) {
        const params = parse(agentsStateParamsSchema, raw);
        return { agent: runtime.getState(params.agentId) };
      },
    },
    'agent.broadcast': {
      params: agentBroadcastParamsSchema,
      async handler(raw) {
        const params = parse(agentBroadcastParamsSchema, raw);
        return runtime.broadcast(
          params.from ? { from: params.from, content: params.content } : { content: params.content },
        );
      },
    },
    'agents.message': {
      params: agentMessageParamsSchema,
      async handler(raw) {
        const params = parse(agentMessageParamsSchema, raw);
        await runtime.send(params.agentId, { from: params.from, content: params.content });
        return { agentId: params.agentId, delivered: true };
      },
    },
    'agents.assign': {
      params: agentAssignParamsSchema,
      async handler(raw) {
        const params = parse(agentAssignParamsSchema, raw);
        const task = await runtime.assignTask(params.agentId, {
          taskName: params.task,
          ...(params.taskId ? { taskId: params.taskId } : {}),
        });
        return { agentId: params.agentId, task };
      },
    },
    'agents.conversation': {
      params: agentRecordsParamsSchema,
      async handler(raw) {
        const params = parse(agentRecordsParamsSchema, raw);
        runtime.getState(params.agentId);
        return {
          agentId: params.agentId,
          messages: await runtime.conversation(params.agentId, { limit: params.limit }),
        };
      },
    },
    'agents.history': {
      params: agentRecordsParamsSchema,
      async handler(raw) {
        const params = parse(agentRecordsParamsSchema, raw);
        runtime.getState(params.agentId);
        return {
          agentId: params.agentId,
          states: await runtime.history(params.agentId, { limit: params.limit }),
          tasks: await runtime.tasks(params.agentId, { limit: params.limit }),
        };
      },
    },
    'agents.move': {
      params: agentMoveParamsSchema,
      async handler(raw) {
        const params = parse(agentMoveParamsSchema, raw);
        const agent = runtime.move(params.agentId, { x: params.x, y: params.y }, 'moved by a client');
        // Answered once the position is on disk: a crash right after the answer does not put the agent back.
        // While the disk refuses it the answer is STORE_UNAVAILABLE; the move is kept and written by the retry,
        // and sending it again is harmless.
        await runtime.written(params.agentId);
        return { agent };
      },
    },
  };
  if (planner && pool) {
    methods['agent.control'] = {
      params: agentControlParamsSchema,
      async handler(raw, caller) {
        const params = parse(agentControlParamsSchema, raw);
        switch (params.action) {
          case 'goal': {
            const result = await planner.plan({
              goal: params.goal,
              sessionKey: params.sessionKey,
              agentId: params.agentId,
              ...(params.idempotencyKey !== undefined ? { idempotencyKey: params.idempotencyKey } : {}),
            });
            // A key sent again gets the plan already made, whose synthesis went (or goes) to the request that
            // made it: this caller gets its own, on its connection alone, so a client waiting for it (agentd
            // goal) is not left waiting for an event that was never to come.
            if (result.replayed && caller) {
              void result.finished.then(
                (synthesis) => {
                  if (caller.signal.aborted) return;
                  caller.sendEvent('agent.synthesis', synthesisEvent(synthesis, params));
                },
                () => undefined,
              );
            }
            return {
              planId: result.planId,
              reply: result.reply,
              tasks: result.tasks,
              rejected: result.rejected,
              ...(result.replayed ? { replayed: true } : {}),
            };
          }
          case 'pause':
            return {
              action: 'pause',
              workItemIds: await pool.pause({
                sessionKey: params.sessionKey,
                ...(params.ids ? { ids: params.ids } : {}),
              }),
            };
          case 'resume':
            return {
              action: 'resume',
              workItemIds: await pool.resume({
                sessionKey: params.sessionKey,
                ...(params.ids ? { ids: params.ids } : {}),
              }),
            };
          case 'cancel':
            return {
              action: 'cancel',
              workItemIds: await pool.cancel({
                sessionKey: params.sessionKey,
                ...(params.ids ? { ids: params.ids } : {}),
              }),
            };
          case 'state':
            return { action: 'state', ...(await pool.snapshot({ sessionKey: params.sessionKey })) };
          case 'status': {
            // The session's work as the pool sees it, plus the agents of the world and what they are doing.
            const snapshot = await pool.snapshot({ sessionKey: params.sessionKey });
            return {
              action: 'status',
              counts: snapshot.counts,
              active: snapshot.active,
              paused: snapshot.paused,
              agents: runtime
                .listStates()
                .map((agent) => ({ id: agent.id, name: agent.name, state: agent.state })),
            };
          }
          case 'heartbeat': {
            if (!heartbeat)
              throw new UserInputError({
                code: ErrorCodes.invalidConfig,
                message: 'the heartbeat is off: features.agent_runtime_v1 is false',
              });
            return { action: 'heartbeat', ...(await heartbeat.sweep()) };
          }
          case 'plan': {
            const plan = await planner.latest(params.sessionKey);
            if (!plan)
              throw new UserInputError({
                code: ErrorCodes.notFound,
                message: `no plan for ${params.sessionKey}: send a goal first (/goal <text>)`,
              });
            return { action: 'plan', ...plan };
          }
        }
      },
    };
  }
  return methods;
}

/** The `send_message {to, content}` tool: agents talk to each other through the runtime's mailboxes. */
export function createSendMessageTool(runtime: AgentRuntime): ToolDefinition {
  return defineTool({
    name: 'send_message',
    description:
      'Send a message to another agent by id. It arrives in their mailbox; their reply is not returned here.',
    examples: [{ to: 'reviewer', content: 'The draft is ready in docs/draft.md.' }],
    input: z.object({
      to: z.string().min(1).max(128).describe('The receiving agent id'),
      content: z.string().min(1).max(20_000),
    }),
    async execute(input, context) {
      if (input.to === context.agentId) {
        throw new UserInputError({
          code: ErrorCodes.invalidRequest,
          message: 'an agent cannot send a message to itself.',
        });
      }
      await runtime.send(input.to, { from: context.agentId, content: input.content });
      return `Message delivered to ${input.to}.`;
    },
  });
}
