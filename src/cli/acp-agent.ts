import { createAcpAgent } from '../acp/index.js';
import type { Runtime } from '../runtime.js';
import { createIdGenerator } from '../util/index.js';

const maxReplayedMessages = 500;

/** Wires a runtime into an ACP agent app; shared by `agentd acp` and tests that connect in-process. */
export function acpAgentFor(runtime: Runtime, agentId = 'main') {
  return createAcpAgent({
    host: {
      chat: runtime.chat,
      bus: runtime.bus,
      history: async (sessionKey) =>
        (await runtime.services.chat.history({ sessionKey, limit: maxReplayedMessages })).messages,
      registerApprover: (sessionKey, approver) => runtime.registerApprover(sessionKey, approver),
    },
    agentId,
    version: runtime.version,
    idGenerator: createIdGenerator(),
    logger: runtime.logger,
  });
}
