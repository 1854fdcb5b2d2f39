import { Readable, Writable } from 'node:stream';
import { ndJsonStream } from '@agentclientprotocol/sdk';
import type { Command } from 'commander';
import { createAcpAgent } from '../../acp/index.js';
import type { AgentdConfig } from '../../config/index.js';
import { createRuntime, type Runtime } from '../../runtime.js';
import { createIdGenerator } from '../../util/index.js';
import { type CliIo, reportError } from '../output.js';

export interface AcpCommandDeps {
  config(): AgentdConfig;
  io: CliIo;
  setExitCode(code: number): void;
}

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

export function registerAcpCommand(program: Command, deps: AcpCommandDeps): void {
  program
    .command('acp')
    .description('run agentd as an Agent Client Protocol agent on stdin/stdout (for Zed and other editors)')
    .option('-a, --agent <id>', 'agent the editor talks to', 'main')
    .action(async (options: { agent: string }) => {
      let runtime: Runtime | undefined;
      try {
        // stdout carries the protocol; the runtime logs to stderr.
        runtime = await createRuntime({ config: deps.config() });
        await runtime.startBackground();
        const connection = acpAgentFor(runtime, options.agent).connect(
          ndJsonStream(
            Writable.toWeb(process.stdout) as WritableStream<Uint8Array>,
            Readable.toWeb(process.stdin) as ReadableStream<Uint8Array>,
          ),
        );
        const stop = () => connection.close();
        process.once('SIGINT', stop);
        process.once('SIGTERM', stop);
        await connection.closed;
        process.off('SIGINT', stop);
        process.off('SIGTERM', stop);
      } catch (error) {
        deps.setExitCode(reportError(deps.io, error, false));
      } finally {
        await runtime?.close().catch(() => {});
      }
    });
}
