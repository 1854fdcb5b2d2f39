import { createInterface } from 'node:readline';
import type { Command } from 'commander';
import type { AgentdConfig } from '../../config/index.js';
import { createRuntime, type Runtime } from '../../runtime.js';
import type { GatewayClient } from '../gateway-client.js';
import { parsePositiveInt } from '../options.js';
import { type CliIo, ExitCodes, printJson, reportError } from '../output.js';
import { connectFromOptions, type RemoteOptions, remoteTurn, sessionKeyFor } from '../remote.js';

/** What the commands need from the program: the configuration, the output, the exit code. */
export interface CliCommandDeps {
  config(): AgentdConfig;
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
    .option('--url <url>', 'a running agentd gateway, e.g. ws://127.0.0.1:7777')
    .option('--token <token>', 'gateway token (default $AGENTD_TOKEN)')
    .option('--timeout-ms <ms>', 'give up after this long', parsePositiveInt('--timeout-ms'), 120_000)
    .option('--json', 'print the result as JSON')
    .action(
      async (
        text: string,
        options: RemoteOptions & { agent: string; session?: string; timeoutMs: number; json?: boolean },
      ) => {
        const json = options.json ?? false;
        const sessionKey = sessionKeyFor(options.agent, options.session);
        let result: {
          runId: string;
          status: string;
          text: string;
          error?: { code: string; message: string };
        };
        try {
          if (options.url) {
            const client = await connectFromOptions(options);
            try {
              result = await remoteTurn(client, sessionKey, text, options.timeoutMs, (delta) => {
                if (!json) deps.io.stdout(delta);
              });
            } finally {
              await client.close();
            }
            if (!json) deps.io.stdout('\n');
          } else {
            const runtime = await createRuntime({ config: deps.config() });
            try {
              const off = runtime.bus.subscribe(
                { sessionKey, types: ['run:text-delta', 'run:tool-started'] },
                (event) => {
                  if (json) return;
                  if (event.type === 'run:text-delta')
                    deps.io.stdout((event.data as { delta: string }).delta);
                  else deps.io.stderr(`[tool ${(event.data as { toolName: string }).toolName}]\n`);
                },
              );
              result = await runtime.sendMessage({
                text,
                agentId: options.agent,
                sessionKey,
                timeoutMs: options.timeoutMs,
              });
              off();
              if (!json) deps.io.stdout('\n');
            } finally {
              await runtime.close();
            }
          }
        } catch (error) {
          fail(deps, error, json);
          return;
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
      'an interactive chat (in-process, or with a running server with --url); /new, /goal, /stop work here too',
    )
    .option('-a, --agent <id>', 'agent id', 'main')
    .option('-s, --session <key>', 'session key')
    .option('--url <url>', 'a running agentd gateway')
    .option('--token <token>', 'gateway token (default $AGENTD_TOKEN)')
    .option('--json', 'one JSON object per reply instead of streamed text (for scripts driving the REPL)')
    .action(async (options: RemoteOptions & { agent: string; session?: string; json?: boolean }) => {
      const sessionKey = sessionKeyFor(options.agent, options.session);
      const json = options.json ?? false;
      let runtime: Runtime | undefined;
      let client: GatewayClient | undefined;
      try {
        if (options.url) client = await connectFromOptions(options);
        else runtime = await createRuntime({ config: deps.config() });
        if (!json) deps.io.stdout(`agentd chat — session ${sessionKey}. Type a message; /exit quits.\n`);
        const lines = createInterface({ input: process.stdin, terminal: process.stdin.isTTY ?? false });
        const write = (delta: string) => {
          if (!json) deps.io.stdout(delta);
        };
        const prompt = () => {
          if (!json) deps.io.stdout('> ');
        };
        const off = runtime?.bus.subscribe({ sessionKey, types: ['run:text-delta'] }, (event) =>
          write((event.data as { delta: string }).delta),
        );
        prompt();
        for await (const line of lines) {
          const text = line.trim();
          if (text === '/exit' || text === '/quit') break;
          if (text) {
            const result = client
              ? await remoteTurn(client, sessionKey, text, 600_000, write)
              : await runtime!.sendMessage({ text, agentId: options.agent, sessionKey });
            if (json) deps.io.stdout(`${JSON.stringify({ sessionKey, ...result })}\n`);
            else {
              if (result.status !== 'completed')
                deps.io.stdout(`\n[${result.status}${result.error ? `: ${result.error.message}` : ''}]`);
              deps.io.stdout('\n');
            }
          }
          prompt();
        }
        off?.();
      } catch (error) {
        fail(deps, error, json);
      } finally {
        await client?.close();
        await runtime?.close();
      }
    });
  return program;
}
