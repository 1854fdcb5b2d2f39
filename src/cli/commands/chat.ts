import type { Command } from 'commander';
import type { AgentdConfig } from '../../config/index.js';
import type { Runtime } from '../../runtime.js';
import { type ChatBackend, type ChatTurnResult, runChatRepl } from '../chat-repl.js';
import type { GatewayClient } from '../gateway-client.js';
import { loadRuntime } from '../lazy-modules.js';
import { parsePositiveInt } from '../options.js';
import { type CliIo, ExitCodes, printJson, reportError } from '../output.js';
import { terminalLogDestination } from '../pretty-log.js';
import {
  connectFromOptions,
  type RemoteOptions,
  remoteTurn,
  sessionKeyFor,
  tokenOption,
  urlOption,
} from '../remote.js';

/** A REPL turn over the gateway waits this long for its final event; `/stop` and Ctrl-C end it sooner. */
const remoteTurnTimeoutMs = 600_000;

/** What the commands need from the program: the configuration, the output, the exit code. */
export interface CliCommandDeps {
  config(): Promise<AgentdConfig>;
  io: CliIo;
  setExitCode(code: number): void;
}

function fail(deps: CliCommandDeps, error: unknown, json: boolean): void {
  deps.setExitCode(reportError(deps.io, error, json));
}

/** `send` (one message) and `chat` (a REPL), in-process or against a running gateway with `--url`. */
export function registerChatCommands(program: Command, deps: CliCommandDeps): Command {
  program
    .command('send')
    .description('send one chat message and print the reply (in-process, or to a running server with --url)')
    .argument('<text>', 'the message')
    .option('-a, --agent <id>', 'agent id', 'main')
    .option('-s, --session <key>', 'session key (default agent:<agent>:main)')
    .addOption(urlOption('a running agentd gateway, e.g. ws://127.0.0.1:7777'))
    .addOption(tokenOption())
    .option('--timeout-ms <ms>', 'give up after this long', parsePositiveInt('--timeout-ms'), 120_000)
    .option('--json', 'print the result as JSON')
    .action(
      async (
        text: string,
        options: RemoteOptions & { agent: string; session?: string; timeoutMs: number; json?: boolean },
      ) => {
        const json = options.json ?? false;
        const sessionKey = sessionKeyFor(options.agent, options.session);
        let result: ChatTurnResult;
        let runtime: Runtime | undefined;
        let client: GatewayClient | undefined;
        try {
          // The REPL's turn, with --timeout-ms, output streamed unless --json.
          let backend: ChatBackend;
          if (options.url) {
            client = await connectFromOptions(options);
            backend = remoteChatBackend(client, sessionKey, options.timeoutMs);
          } else {
            runtime = await (await loadRuntime()).createRuntime({
              config: await deps.config(),
              ...terminalLogDestination(),
            });
            backend = localChatBackend(runtime, options.agent, sessionKey, options.timeoutMs);
          }
          result = await backend.turn(text, {
            delta: (delta) => {
              if (!json) deps.io.stdout(delta);
            },
            tool: (name) => {
              if (!json) deps.io.stderr(`[tool ${name}]\n`);
            },
          });
          if (!json) deps.io.stdout('\n');
        } catch (error) {
          fail(deps, error, json);
          return;
        } finally {
          await client?.close();
          await runtime?.close();
        }
        if (json) printJson(deps.io, { sessionKey, ...result });
        if (result.status !== 'completed') {
          if (!json)
            deps.io.stderr(
              `agentd: the run ended with status ${result.status}${result.error ? `: ${result.error.message} (${result.error.code})` : ''}\n`,
            );
          deps.setExitCode(ExitCodes.failure);
        }
      },
    );

  program
    .command('chat')
    .description(
      'an interactive chat (in-process, or with a running server with --url); /help lists its commands',
    )
    .option('-a, --agent <id>', 'agent id', 'main')
    .option('-s, --session <key>', 'session key')
    .addOption(urlOption('a running agentd gateway'))
    .addOption(tokenOption())
    .option('--json', 'one JSON object per reply instead of streamed text (for scripts driving the REPL)')
    .action(async (options: RemoteOptions & { agent: string; session?: string; json?: boolean }) => {
      const sessionKey = sessionKeyFor(options.agent, options.session);
      const json = options.json ?? false;
      let runtime: Runtime | undefined;
      let client: GatewayClient | undefined;
      try {
        let backend: ChatBackend;
        if (options.url) {
          client = await connectFromOptions(options);
          backend = remoteChatBackend(client, sessionKey);
        } else {
          runtime = await (await loadRuntime()).createRuntime({
            config: await deps.config(),
            ...terminalLogDestination(),
          });
          backend = localChatBackend(runtime, options.agent, sessionKey);
          // While the person types their first message.
          void runtime.prepare();
        }
        await runChatRepl({
          backend,
          sessionKey,
          input: process.stdin,
          ...(process.stdin.isTTY && !json ? { terminal: process.stdout } : {}),
          io: deps.io,
          json,
        });
      } catch (error) {
        fail(deps, error, json);
      } finally {
        await client?.close();
        await runtime?.close();
      }
    });
  return program;
}

/** A status object as one line: its plain fields, `key value` separated by middots. */
function statusLine(status: Record<string, unknown>): string {
  return Object.entries(status)
    .filter(([, value]) => ['string', 'number', 'boolean'].includes(typeof value))
    .map(([key, value]) => `${key} ${String(value)}`)
    .join(' · ');
}

/** The REPL against a running gateway: turns by `chat.send`, `/stop` by `chat.abort`, `/new` by `sessions.reset`. */
export function remoteChatBackend(
  client: GatewayClient,
  sessionKey: string,
  timeoutMs = remoteTurnTimeoutMs,
): ChatBackend {
  return {
    turn: (text, on) => remoteTurn(client, sessionKey, text, timeoutMs, on.delta, on.tool),
    async stop() {
      const result = await client.call<{ aborted: boolean }>('chat.abort', { sessionKey });
      return { aborted: result.aborted };
    },
    async reset(reason) {
      const result = await client.call<{ sessionId?: string }>('sessions.reset', { key: sessionKey, reason });
      return result.sessionId ? { sessionId: result.sessionId } : {};
    },
    status: async () => statusLine(await client.call<Record<string, unknown>>('status')),
  };
}

/** The REPL in this process: the runtime's chat service and session store. */
export function localChatBackend(
  runtime: Runtime,
  agentId: string,
  sessionKey: string,
  timeoutMs?: number,
): ChatBackend {
  return {
    async turn(text, on) {
      const off = runtime.bus.subscribe(
        { sessionKey, types: ['run:text-delta', 'run:tool-started'] },
        (event) => {
          if (event.type === 'run:text-delta') on.delta(event.data.delta);
          else on.tool(event.data.toolName);
        },
      );
      try {
        return await runtime.sendMessage({
          text,
          agentId,
          sessionKey,
          ...(timeoutMs !== undefined ? { timeoutMs } : {}),
        });
      } finally {
        off();
      }
    },
    async stop() {
      const result = await runtime.chat.abort({ sessionKey });
      return { aborted: result.aborted };
    },
    async reset(reason) {
      const result = await runtime.services.sessions.reset({ sessionKey, reason, archive: true });
      return { sessionId: result.sessionId };
    },
    status: async () => statusLine((await runtime.services.health.status()) as Record<string, unknown>),
  };
}
