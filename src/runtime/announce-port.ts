import type { ChatService } from '../chat/index.js';
import { ErrorCodes, SystemError } from '../util/index.js';

/**
 * Chat and the agents need each other: chat's `/goal` is the planner's, and the planner's syntheses and the
 * heartbeat's nudges are chat announcements. The agents are wired first and post through this port; the
 * composition root binds it to the chat service once, right after creating it and before anything starts,
 * so this is the one forward reference in the wiring and it is explicit.
 */
export interface AnnouncePort {
  announce: ChatService['announce'];
  /** Called once by the composition root; a second call is a wiring bug. */
  bind(chat: Pick<ChatService, 'announce'>): void;
}

export function createAnnouncePort(): AnnouncePort {
  let target: Pick<ChatService, 'announce'> | undefined;
  return {
    announce(input) {
      if (!target)
        throw new SystemError({
          code: ErrorCodes.internal,
          message: 'an announcement was posted before the chat service was bound',
        });
      return target.announce(input);
    },
    bind(chat) {
      if (target)
        throw new SystemError({ code: ErrorCodes.internal, message: 'the chat service is already bound' });
      target = chat;
    },
  };
}
