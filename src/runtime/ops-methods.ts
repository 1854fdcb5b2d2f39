import { z } from 'zod';
import { type MethodTable, OperatorScopes } from '../gateway/index.js';
import type { LogRing } from '../telemetry/index.js';
import type { Clock } from '../util/index.js';
import { ErrorCodes, UserInputError } from '../util/index.js';

/** What `logs.tail` names as its source: agentd keeps recent lines in memory, not in a file it could serve. */
export const logTailSource = 'agentd (in-memory, last lines)';

/**
 * Operator methods OpenClaw's CLI calls (`openclaw gateway call logs.tail|channels.status`): agentd's own
 * recent log lines, already redacted by the logger, and its connector state.
 */
export function registerOpsMethods(options: { methods: MethodTable; logs: LogRing; clock: Clock }): void {
  const { methods, logs, clock } = options;

  // `operator.read`, the scope OpenClaw's CLI asks for: the lines were redacted before they were kept.
  methods.register('logs.tail', {
    scopes: [OperatorScopes.read],
    params: z.looseObject({
      cursor: z.number().int().min(0).optional(),
      limit: z.number().int().min(1).max(5_000).default(200),
      maxBytes: z.number().int().min(1).max(1_000_000).default(250_000),
    }),
    handler(params) {
      const tail = logs.tail({
        limit: params.limit,
        maxBytes: params.maxBytes,
        ...(params.cursor !== undefined ? { cursor: params.cursor } : {}),
      });
      return {
        file: logTailSource,
        cursor: tail.cursor,
        size: tail.size,
        lines: tail.lines,
        ...(tail.truncated ? { truncated: true } : {}),
        ...(tail.reset ? { reset: true } : {}),
      };
    },
  });

  // agentd has no chat connectors (WhatsApp, Telegram, Slack, …) yet: the honest status is an empty one.
  methods.register('channels.status', {
    scopes: [OperatorScopes.read],
    params: z.looseObject({
      probe: z.boolean().optional(),
      timeoutMs: z.number().int().min(0).optional(),
      channel: z.string().min(1).max(64).optional(),
    }),
    handler(params) {
      if (params.channel !== undefined) {
        throw new UserInputError({
          code: ErrorCodes.notFound,
          message: `agentd has no channel ${JSON.stringify(params.channel)}: it has no chat connectors; clients connect over the gateway`,
          details: { channel: params.channel },
        });
      }
      return {
        ts: clock.now(),
        channelOrder: [],
        channelLabels: {},
        channels: {},
        channelAccounts: {},
        channelDefaultAccountId: {},
      };
    },
  });
}
