import { z } from 'zod';
import type { Clock } from '../util/index.js';
import { AgentdError, ErrorCodes, maxTimerMs, systemClock, UserInputError } from '../util/index.js';
import {
  registerClientMethods,
  sessionDefaults,
  sessionRow,
  statusWithOpenClawSummary,
} from './client-methods.js';
import { createDedupeCache, type DedupeCache } from './idempotency.js';
import { acceptedThenFinal, type MethodContext, type MethodTable } from './method-table.js';
import { OperatorScopes } from './scopes.js';
import type { ChatHistoryMessage, ChatRunResult, GatewayServices } from './services.js';
import { defaultAgentId, mainSessionKey, resolveSessionKey } from './session-key.js';

export interface CoreMethodsOptions {
  /** Largest chat message text accepted, in UTF-8 bytes. */
  maxMessageBytes?: number;
  /** How long a finished idempotency key is remembered. */
  dedupeTtlMs?: number;
  dedupeMaxEntries?: number;
  /** Default for `agent.wait`. */
  waitTimeoutMs?: number;
  clock?: Clock;
}

const { read, write, admin } = OperatorScopes;

const sessionKeyParam = z.string().min(1).max(256);
const idempotencyKeyParam = z.string().min(1).max(256);
/** The longest wait a run's waiter takes (`maxTimerMs`); longer ones are refused, not clamped. */
const maxWaitMs = maxTimerMs;
const memoryIdParam = z.union([z.string().min(1).max(256), z.number().int().nonnegative()]).transform(String);

/** OpenClaw clients send more optional fields than agentd reads; unknown fields are accepted and ignored. */
const chatSendParams = z.looseObject({
  sessionKey: sessionKeyParam,
  message: z.string(),
  idempotencyKey: idempotencyKeyParam,
  thinking: z.string().optional(),
  deliver: z.boolean().optional(),
  attachments: z.array(z.unknown()).optional(),
  timeoutMs: z.number().int().positive().optional(),
});

const agentParams = z.looseObject({
  message: z.string(),
  idempotencyKey: idempotencyKeyParam,
  agentId: z.string().min(1).max(64).optional(),
  sessionKey: sessionKeyParam.optional(),
  /** Seconds, as `openclaw agent --timeout` sends it; at most `maxWaitMs`. */
  timeout: z
    .number()
    .positive()
    .max(maxWaitMs / 1000)
    .optional(),
  deliver: z.boolean().optional(),
  attachments: z.array(z.unknown()).optional(),
});

/** Turns chat text into what a run may see: NFC, no NUL, no control characters other than tab and newlines. */
function normalizeMessage(text: string, maxBytes: number): string {
  if (text.includes('\u0000')) {
    throw new UserInputError({
      code: ErrorCodes.invalidRequest,
      message: 'message must not contain NUL characters.',
    });
  }
  // biome-ignore lint/suspicious/noControlCharactersInRegex: stripping control characters is the point
  const cleaned = text.normalize('NFC').replace(/[\u0001-\u0008\u000b\u000c\u000e-\u001f\u007f]/g, '');
  const size = Buffer.byteLength(cleaned, 'utf8');
  if (size > maxBytes) {
    throw new UserInputError({
      code: ErrorCodes.payloadTooLarge,
      message: `message is ${size} bytes; the limit is ${maxBytes} bytes.`,
      details: { sizeBytes: size, maxBytes },
    });
  }
  return cleaned;
}

function rejectAttachments(attachments: unknown[] | undefined): void {
  if (attachments && attachments.length > 0) {
    throw new UserInputError({
      code: ErrorCodes.invalidRequest,
      message: 'attachments are not supported by agentd yet.',
    });
  }
}

/** Stop reasons as OpenClaw clients know them; agentd's clean stops keep their own names. */
function stopReasonOf(status: ChatRunResult['status']): string {
  return status === 'completed' ? 'stop' : status;
}

function agentFinalPayload(
  result: ChatRunResult,
  acceptedAt: number,
  sessionKey: string,
): Record<string, unknown> {
  const endedAt = result.endedAt;
  const meta = {
    durationMs: endedAt !== undefined ? Math.max(0, endedAt - (result.startedAt ?? acceptedAt)) : undefined,
    aborted: result.status === 'aborted',
    stopReason: stopReasonOf(result.status),
    agentMeta: {
      sessionKey,
      ...(result.model ? { model: result.model } : {}),
      ...(result.usage
        ? {
            usage: {
              input: result.usage.inputTokens,
              output: result.usage.outputTokens,
              total: result.usage.inputTokens + result.usage.outputTokens,
            },
          }
        : {}),
    },
    ...(result.assistantMemoryId ? { memoryId: result.assistantMemoryId } : {}),
  };
  if (result.status === 'error') {
    return {
      runId: result.runId,
      status: 'error',
      summary: result.error?.message ?? 'run failed',
      error: result.error,
      result: { payloads: [], meta },
    };
  }
  return {
    runId: result.runId,
    status: 'ok',
    summary: result.status === 'aborted' ? 'aborted' : 'completed',
    result: { payloads: result.text ? [{ text: result.text, mediaUrl: null }] : [], meta },
  };
}

function isTimeout(error: unknown): boolean {
  return AgentdError.isInstance(error) && error.code === ErrorCodes.timeout;
}

/** OpenClaw's history rows: user text as a string, assistant text as content blocks, long text cut. */
function toHistoryRow(message: ChatHistoryMessage, maxChars: number): Record<string, unknown> {
  const text = message.content.length > maxChars ? `${message.content.slice(0, maxChars)}…` : message.content;
  return {
    role: message.role,
    content: message.role === 'user' ? text : [{ type: 'text', text }],
    timestamp: message.timestamp,
    memoryId: message.memoryId,
    ...(message.runId ? { runId: message.runId } : {}),
    ...(text.length !== message.content.length ? { truncated: true } : {}),
  };
}

/** What a key's cached answer says of its run: `ok` or `error`, with the error. */
function outcomeOf(runId: string, result: Pick<ChatRunResult, 'status' | 'error'>): Record<string, unknown> {
  return {
    runId,
    status: result.status === 'error' ? 'error' : 'ok',
    ...(result.error ? { error: result.error } : {}),
  };
}

/**
 * Registers the chat, session, agent, memory and health methods both protocols share. Session keys are
 * resolved here (short keys belong to the default agent); the services only ever see full keys.
 */
export function registerCoreMethods(
  table: MethodTable,
  services: GatewayServices,
  options: CoreMethodsOptions = {},
): { dedupe: DedupeCache } {
  const clock = options.clock ?? systemClock;
  const maxMessageBytes = options.maxMessageBytes ?? 256 * 1024;
  const waitTimeoutMs = options.waitTimeoutMs ?? 30_000;
  const dedupe = createDedupeCache({
    ttlMs: options.dedupeTtlMs ?? 10 * 60_000,
    maxEntries: options.dedupeMaxEntries ?? 10_000,
    clock,
  });

  table.declareEvents(['agent', 'chat']);

  /** Starts a run, or reports the run an idempotency key already started. */
  const startRun = async (
    input: { sessionKey: string; agentId: string; text: string; idempotencyKey: string },
    context: MethodContext,
  ): Promise<{ runId: string; duplicate: Record<string, unknown> | undefined }> => {
    const existing = dedupe.get(input.idempotencyKey);
    if (existing?.state === 'in_flight') {
      return { runId: existing.runId, duplicate: { runId: existing.runId, status: 'in_flight' } };
    }
    if (existing?.state === 'done') {
      return { runId: existing.runId, duplicate: { ...existing.result, cached: true } };
    }
    context.watchSession(input.sessionKey);
    const ack = await services.chat.send({
      ...input,
      source: { protocol: context.protocol, connId: context.connId, clientId: context.clientInfo.id },
    });
    if (ack.status === 'in_flight')
      return { runId: ack.runId, duplicate: { runId: ack.runId, status: 'in_flight' } };
    dedupe.begin(input.idempotencyKey, ack.runId);
    // The key's run ended before this cache knew it (before a restart, or longer ago than its window).
    if (ack.status === 'ended') {
      const outcome = outcomeOf(ack.runId, ack.outcome);
      dedupe.finish(input.idempotencyKey, outcome);
      return { runId: ack.runId, duplicate: { ...outcome, cached: true } };
    }
    services.chat.wait(ack.runId).then(
      (result) => dedupe.finish(input.idempotencyKey, outcomeOf(ack.runId, result)),
      () => dedupe.forget(input.idempotencyKey),
    );
    return { runId: ack.runId, duplicate: undefined };
  };

  table.register('health', {
    scopes: [read],
    params: z.looseObject({}),
    handler: async () => await services.health.health(),
  });

  table.register('status', {
    scopes: [read],
    params: z.looseObject({
      includeCliProjection: z.boolean().optional(),
      includeChannelSummary: z.boolean().optional(),
    }),
    handler: async (params) => await statusWithOpenClawSummary(services, params, clock.now()),
  });

  table.register('chat.send', {
    scopes: [write],
    params: chatSendParams,
    async handler(params, context) {
      const { sessionKey, agentId } = resolveSessionKey(params.sessionKey);
      rejectAttachments(params.attachments);
      const text = normalizeMessage(params.message, maxMessageBytes);
      const command = text.trim();
      if (command === '/stop') {
        const result = await services.chat.abort({ sessionKey });
        return { ok: true, aborted: result.aborted, runIds: result.runIds };
      }
      if (command === '/new' || command === '/reset') {
        const reason = command === '/new' ? 'new' : 'reset';
        const reset = await services.sessions.reset({ sessionKey, reason, archive: true });
        context.sessionChanged({ sessionKey, agentId, reason, sessionId: reset.sessionId });
        return { ok: true, runId: params.idempotencyKey, status: 'ok', reset };
      }
      if (command.length === 0) {
        throw new UserInputError({ code: ErrorCodes.invalidRequest, message: 'message must not be empty.' });
      }
      const { runId, duplicate } = await startRun(
        { sessionKey, agentId, text, idempotencyKey: params.idempotencyKey },
        context,
      );
      return duplicate ?? { runId, status: 'started' };
    },
  });

  table.register('agent', {
    scopes: [write],
    params: agentParams,
    async handler(params, context) {
      const fallbackAgent = params.agentId ?? defaultAgentId;
      const { sessionKey, agentId } = resolveSessionKey(
        params.sessionKey ?? mainSessionKey(fallbackAgent),
        fallbackAgent,
      );
      rejectAttachments(params.attachments);
      const text = normalizeMessage(params.message, maxMessageBytes);
      if (text.trim().length === 0) {
        throw new UserInputError({ code: ErrorCodes.invalidRequest, message: 'message must not be empty.' });
      }
      const acceptedAt = clock.now();
      const { runId, duplicate } = await startRun(
        { sessionKey, agentId, text, idempotencyKey: params.idempotencyKey },
        context,
      );
      if (duplicate) return duplicate;
      const timeoutMs = params.timeout !== undefined ? Math.round(params.timeout * 1000) : undefined;
      const final = services.chat.wait(runId, timeoutMs !== undefined ? { timeoutMs } : {}).then(
        (result) => agentFinalPayload(result, acceptedAt, sessionKey),
        (error: unknown) => {
          if (isTimeout(error)) return { runId, status: 'timeout', summary: 'timeout' };
          throw error;
        },
      );
      return acceptedThenFinal({ runId, sessionKey, agentId, status: 'accepted', acceptedAt }, final);
    },
  });

  table.register('agent.wait', {
    scopes: [write],
    params: z.looseObject({
      runId: z.string().min(1).max(256),
      timeoutMs: z.number().int().positive().max(maxWaitMs).optional(),
    }),
    async handler(params) {
      try {
        const result = await services.chat.wait(params.runId, {
          timeoutMs: params.timeoutMs ?? waitTimeoutMs,
        });
        return {
          runId: result.runId,
          status: result.status === 'error' ? 'error' : 'ok',
          runStatus: result.status,
          text: result.text,
          ...(result.assistantMemoryId !== undefined ? { memoryId: result.assistantMemoryId } : {}),
          ...(result.userMemoryId !== undefined ? { userMemoryId: result.userMemoryId } : {}),
          ...(result.startedAt !== undefined ? { startedAt: result.startedAt } : {}),
          ...(result.endedAt !== undefined ? { endedAt: result.endedAt } : {}),
          ...(result.error ? { error: result.error } : {}),
        };
      } catch (error) {
        if (isTimeout(error)) return { runId: params.runId, status: 'timeout' };
        throw error;
      }
    },
  });

  table.register('chat.history', {
    scopes: [read],
    params: z.looseObject({
      sessionKey: sessionKeyParam,
      limit: z.number().int().min(1).max(1000).default(200),
      maxChars: z.number().int().min(1).max(100_000).default(12_000),
      before: memoryIdParam.optional(),
    }),
    async handler(params, context) {
      const { sessionKey } = resolveSessionKey(params.sessionKey);
      context.watchSession(sessionKey);
      const history = await services.chat.history({
        sessionKey,
        limit: params.limit,
        ...(params.before !== undefined ? { beforeMemoryId: params.before } : {}),
      });
      return {
        sessionKey: history.sessionKey,
        sessionId: history.sessionId,
        messages: history.messages.map((message) => toHistoryRow(message, params.maxChars)),
        hasMore: history.hasMore ?? false,
      };
    },
  });

  table.register('chat.abort', {
    scopes: [write],
    params: z.looseObject({ sessionKey: sessionKeyParam, runId: z.string().min(1).max(256).optional() }),
    async handler(params) {
      const { sessionKey } = resolveSessionKey(params.sessionKey);
      const result = await services.chat.abort({
        sessionKey,
        ...(params.runId ? { runId: params.runId } : {}),
      });
      return { ok: true, aborted: result.aborted, runIds: result.runIds };
    },
  });

  table.register('chat.inject', {
    scopes: [admin],
    params: z.looseObject({
      sessionKey: sessionKeyParam,
      message: z.string().min(1),
      label: z.string().max(200).optional(),
      role: z.enum(['assistant', 'system']).default('assistant'),
      idempotencyKey: z.string().min(1).max(256).optional(),
    }),
    async handler(params, context) {
      const { sessionKey } = resolveSessionKey(params.sessionKey);
      context.watchSession(sessionKey);
      const text = normalizeMessage(params.message, maxMessageBytes);
      const { memoryId } = await services.chat.inject({
        sessionKey,
        role: params.role,
        text,
        ...(params.label !== undefined ? { label: params.label } : {}),
        ...(params.idempotencyKey !== undefined ? { idempotencyKey: params.idempotencyKey } : {}),
      });
      return { ok: true, messageId: memoryId, memoryId };
    },
  });

  table.register('sessions.list', {
    scopes: [read],
    params: z.looseObject({
      agentId: z.string().min(1).max(64).optional(),
      limit: z.number().int().min(1).max(1000).default(100),
      includeArchived: z.boolean().default(false),
      search: z.string().max(200).optional(),
    }),
    async handler(params) {
      const sessions = await services.sessions.list({
        limit: params.limit,
        includeArchived: params.includeArchived,
        ...(params.agentId !== undefined ? { agentId: params.agentId } : {}),
        ...(params.search !== undefined ? { search: params.search } : {}),
      });
      return {
        ts: clock.now(),
        count: sessions.length,
        defaults: sessionDefaults(services),
        sessions: sessions.map((summary) => sessionRow(summary, services.models.forAgent(summary.agentId))),
      };
    },
  });

  table.register('sessions.preview', {
    scopes: [read],
    params: z.looseObject({
      keys: z.array(sessionKeyParam).min(1).max(64),
      limit: z.number().int().min(1).max(100).default(12),
      maxChars: z.number().int().min(1).max(10_000).default(240),
    }),
    async handler(params) {
      const keys = params.keys.map((key) => resolveSessionKey(key).sessionKey);
      const previews = await services.sessions.preview({
        keys,
        limit: params.limit,
        maxChars: params.maxChars,
      });
      return { ts: clock.now(), previews };
    },
  });

  /** OpenClaw names the session `key`; agentd's own clients may say `sessionKey`. */
  const keyed = <T extends z.ZodRawShape>(shape: T) =>
    z
      .looseObject({ key: sessionKeyParam.optional(), sessionKey: sessionKeyParam.optional(), ...shape })
      .refine((value) => value.key !== undefined || value.sessionKey !== undefined, {
        message: 'key is required',
        path: ['key'],
      })
      .transform((value) => ({
        ...value,
        key: resolveSessionKey((value.key ?? value.sessionKey) as string).sessionKey,
      }));

  table.register('sessions.reset', {
    scopes: [admin],
    params: keyed({ reason: z.enum(['new', 'reset']).default('reset'), archive: z.boolean().default(true) }),
    async handler(params, context) {
      const result = await services.sessions.reset({
        sessionKey: params.key,
        reason: params.reason,
        archive: params.archive,
      });
      context.sessionChanged({
        sessionKey: params.key,
        agentId: resolveSessionKey(params.key).agentId,
        reason: params.reason,
        sessionId: result.sessionId,
      });
      return { ok: true, key: result.sessionKey, ...result };
    },
  });

  table.register('sessions.delete', {
    scopes: [admin],
    params: keyed({ deleteTranscript: z.boolean().default(true) }),
    async handler(params, context) {
      const result = await services.sessions.delete({
        sessionKey: params.key,
        deleteTranscript: params.deleteTranscript,
      });
      if (result.deleted) {
        context.sessionChanged({
          sessionKey: params.key,
          agentId: resolveSessionKey(params.key).agentId,
          reason: 'delete',
        });
      }
      return { ok: true, key: params.key, deleted: result.deleted };
    },
  });

  table.register('sessions.compact', {
    scopes: [admin],
    params: keyed({ maxLines: z.number().int().min(1).max(100_000).optional() }),
    async handler(params) {
      const result = await services.sessions.compact({
        sessionKey: params.key,
        ...(params.maxLines !== undefined ? { maxLines: params.maxLines } : {}),
      });
      return { ok: true, key: params.key, ...result };
    },
  });

  table.register('sessions.patch', {
    scopes: [write],
    params: keyed({
      label: z.string().max(200).nullable().optional(),
      model: z.string().max(200).nullable().optional(),
      thinkingLevel: z.string().max(40).nullable().optional(),
    }),
    async handler(params, context) {
      const entry = await services.sessions.patch({
        sessionKey: params.key,
        ...(params.label !== undefined ? { label: params.label } : {}),
        ...(params.model !== undefined ? { model: params.model } : {}),
        ...(params.thinkingLevel !== undefined ? { thinkingLevel: params.thinkingLevel } : {}),
      });
      context.sessionChanged({
        sessionKey: params.key,
        agentId: entry.agentId,
        reason: 'patch',
        sessionId: entry.sessionId,
      });
      return { ok: true, key: params.key, entry };
    },
  });

  table.register('memory.query', {
    scopes: [read],
    params: z.looseObject({
      sessionKey: sessionKeyParam,
      topic: z.string().max(1000).optional(),
      memoryId: memoryIdParam.optional(),
      memoryIds: z.array(memoryIdParam).max(1000).optional(),
      kind: z.enum(['summary', 'entry', 'all']).default('all'),
      limit: z.number().int().min(1).max(128).default(25),
      includeArchived: z.boolean().default(true),
    }),
    async handler(params) {
      const { sessionKey, agentId } = resolveSessionKey(params.sessionKey);
      const memoryIds = [
        ...(params.memoryId !== undefined ? [params.memoryId] : []),
        ...(params.memoryIds ?? []),
      ];
      const result = await services.memory.query({
        sessionKey,
        agentId,
        kind: params.kind,
        limit: params.limit,
        includeArchived: params.includeArchived,
        ...(params.topic !== undefined ? { topic: params.topic } : {}),
        ...(memoryIds.length > 0 ? { memoryIds } : {}),
      });
      return { sessionKey, topic: params.topic ?? null, items: result.items };
    },
  });

  table.register('memory.recall', {
    scopes: [read],
    params: z.looseObject({
      sessionKey: sessionKeyParam,
      limit: z.number().int().min(1).max(128).default(25),
      includeArchived: z.boolean().default(true),
      includeFull: z.boolean().default(false),
    }),
    async handler(params) {
      const { sessionKey, agentId } = resolveSessionKey(params.sessionKey);
      const result = await services.memory.recall({
        sessionKey,
        agentId,
        limit: params.limit,
        includeArchived: params.includeArchived,
        includeFull: params.includeFull,
      });
      return { sessionKey, items: result.items };
    },
  });

  registerClientMethods(table, services, { clock });
  return { dedupe };
}
