import { Readable, Writable } from 'node:stream';
import type { Command } from 'commander';
import type { AgentdConfig } from '../../config/index.js';
import type { Runtime } from '../../runtime.js';
import { loadRuntime } from '../lazy-modules.js';
import { type CliIo, reportError } from '../output.js';

export interface AcpCommandDeps {
  config(): Promise<AgentdConfig>;
  io: CliIo;
  setExitCode(code: number): void;
}

export function registerAcpCommand(program: Command, deps: AcpCommandDeps): void {
  program
    .command('acp')
    .description('run agentd as an Agent Client Protocol agent on stdin/stdout (for Zed and other editors)')
    .option('-a, --agent <id>', 'agent the editor talks to', 'main')
    .action(async (options: { agent: string }) => {
      let runtime: Runtime | undefined;
      try {
        const [{ createRuntime }, { acpAgentFor }, { ndJsonStream }] = await Promise.all([
          loadRuntime(),
          import('../acp-agent.js'),
          import('@agentclientprotocol/sdk'),
        ]);
        // stdout carries the protocol; the runtime logs to stderr.
        runtime = await createRuntime({ config: await deps.config() });
        await runtime.startBackground();
        const connection = acpAgentFor(runtime, options.agent).connect(
          ndJsonStream(
            Writable.toWeb(process.stdout) as WritableStream<Uint8Array>,
            Readable.toWeb(process.stdin) as ReadableStream<Uint8Array>,
          ),
        );
        // The editor's first prompt comes after its handshake and a session: the turn's loading is done by then.
        void runtime.prepare();
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
