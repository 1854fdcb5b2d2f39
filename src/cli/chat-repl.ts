import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import type { CliIo } from './output.js';

export interface ChatTurnResult {
  runId: string;
  status: string;
  text: string;
  error?: { code: string; message: string };
}

/** What the REPL needs from agentd, in-process or over `--url`. */
export interface ChatBackend {
  /** One turn; streams its text and tool calls; resolves when the run has ended, however it ended. */
  turn(text: string, on: { delta(text: string): void; tool(name: string): void }): Promise<ChatTurnResult>;
  /** Aborts whatever runs in the session; answers at once, without waiting for the run to wind down. */
  stop(): Promise<{ aborted: boolean }>;
  /** `/new` or `/reset`: the same session key starts over with an empty conversation. */
  reset(reason: 'new' | 'reset'): Promise<{ sessionId?: string }>;
  /** One line about the server: model, store, running turns. */
  status(): Promise<string>;
}

export interface ChatReplOptions {
  backend: ChatBackend;
  sessionKey: string;
  input: Readable;
  /**
   * The terminal when stdin is one: readline then echoes what is typed, keeps a history for the arrow keys
   * and turns Ctrl-C into "stop the turn" instead of killing the process.
   */
  terminal?: Writable;
  io: CliIo;
  /** One JSON object per reply or command instead of streamed text (for scripts driving the REPL). */
  json: boolean;
}

const help = `Commands:
  /new, /reset   start the session over (the old conversation is archived)
  /stop          stop the running reply (Ctrl-C does the same)
  /goal <text>   plan the goal into work items for worker agents
  /status        the server's model, store and running turns
  /help          this list
  /exit, /quit   leave (Ctrl-D too)
Anything else is sent to the agent.
`;

/**
 * The interactive chat. Lines are handled one after the other, so a message typed while a reply streams
 * waits for it; `/stop` and Ctrl-C are the exception and act at once, since they exist to end that reply.
 * Resolves when the user leaves (or stdin ends) and the last queued line is done.
 */
export async function runChatRepl(options: ChatReplOptions): Promise<void> {
  const { backend, io, json, sessionKey } = options;
  const lines = createInterface({
    input: options.input,
    ...(options.terminal
      ? { output: options.terminal, terminal: true, historySize: 500 }
      : { terminal: false }),
  });
  const say = (text: string) => {
    if (!json) io.stdout(text);
  };
  const report = (value: Record<string, unknown>) => {
    if (json) io.stdout(`${JSON.stringify({ sessionKey, ...value })}\n`);
  };
  const prompt = () => {
    if (json) return;
    if (options.terminal) lines.prompt();
    else io.stdout('> ');
  };
  lines.setPrompt('> ');

  let busy = false;
  let leaving = false;
  const queue: string[] = [];
  let wake: (() => void) | undefined;

  const stop = async () => {
    const { aborted } = await backend.stop();
    say(aborted ? '\n[stopping]\n' : 'Nothing is running.\n');
    report({ command: '/stop', aborted });
    if (!busy) prompt();
  };

  const handle = async (text: string) => {
    if (text === '/exit' || text === '/quit') {
      leaving = true;
      return;
    }
    if (text === '/help') say(help);
    else if (text === '/status') {
      const line = await backend.status();
      say(`${line}\n`);
      report({ command: '/status', status: line });
    } else if (text === '/new' || text === '/reset') {
      const reset = await backend.reset(text === '/new' ? 'new' : 'reset');
      say(`New session${reset.sessionId ? ` ${reset.sessionId}` : ''} under ${sessionKey}.\n`);
      report({ command: text, ...reset });
    } else if (text) {
      let atLineStart = true;
      const result = await backend.turn(text, {
        delta: (delta) => {
          say(delta);
          if (delta) atLineStart = delta.endsWith('\n');
        },
        tool: (name) => {
          say(`${atLineStart ? '' : '\n'}[tool ${name}]\n`);
          atLineStart = true;
        },
      });
      if (json) report({ ...result });
      else {
        if (result.status !== 'completed')
          say(
            `${atLineStart ? '' : '\n'}[${result.status}${result.error ? `: ${result.error.message}` : ''}]`,
          );
        say('\n');
      }
    }
  };

  lines.on('line', (line) => {
    const text = line.trim();
    if (text === '/stop') {
      void stop().catch((error: unknown) => io.stderr(`agentd: ${String(error)}\n`));
      return;
    }
    queue.push(text);
    wake?.();
  });
  // Only raised when readline owns a terminal; piped input keeps the default signal behaviour.
  lines.on('SIGINT', () => {
    if (busy) void stop().catch((error: unknown) => io.stderr(`agentd: ${String(error)}\n`));
    else {
      leaving = true;
      lines.close();
    }
  });
  let ended = false;
  lines.on('close', () => {
    ended = true;
    wake?.();
  });

  say(`agentd chat — session ${sessionKey}. Type a message; /help lists the commands, /exit quits.\n`);
  prompt();
  while (!leaving) {
    const text = queue.shift();
    if (text === undefined) {
      if (ended) break;
      await new Promise<void>((resolve) => {
        wake = resolve;
      });
      wake = undefined;
      continue;
    }
    busy = true;
    try {
      await handle(text);
    } finally {
      busy = false;
    }
    if (!leaving) prompt();
  }
  lines.close();
}
