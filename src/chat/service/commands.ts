import type { SessionRef } from '../../memory/index.js';
import type { ChatRunRecord } from '../chat-service.js';
import type { ChatContext } from './context.js';
import { compactSession, resetSession } from './session-commands.js';

/**
 * The reply of a slash command: `/new`, `/reset` and `/compact` are built in, the rest come from
 * `slashCommands`. Undefined when `name` is no command, so the text goes to the model as it is.
 */
export function builtInCommand(
  ctx: ChatContext,
  name: string,
  argument: string,
  record: ChatRunRecord,
  ref: SessionRef,
  signal: AbortSignal,
): (() => Promise<string>) | undefined {
  switch (name) {
    case 'new':
    case 'reset':
      return async () => {
        const result = await resetSession(ctx, {
          sessionKey: ref.sessionKey,
          agentId: ref.agentId,
          reason: argument || name,
          archive: true,
        });
        return result.archived
          ? `Started a new session. The previous conversation (${result.previousSessionId}) is archived and can still be recalled.`
          : 'Started a new session.';
      };
    case 'compact':
      return async () => {
        const result = await compactSession(ctx, { sessionKey: ref.sessionKey, agentId: ref.agentId });
        return result.compacted
          ? `Compacted the session: ${result.entriesBefore} → ${result.entriesAfter} active entries, ${result.tokensBefore} → ${result.tokensAfter} tokens.`
          : 'Nothing to compact yet.';
      };
    default: {
      const handler = ctx.options.slashCommands?.[name];
      if (!handler) return undefined;
      return () =>
        handler({
          argument,
          sessionKey: ref.sessionKey,
          agentId: ref.agentId,
          runId: record.runId,
          signal,
        });
    }
  }
}
