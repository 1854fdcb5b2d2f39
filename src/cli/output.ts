import { AgentdError, coerceError, ErrorCodes } from '../util/index.js';
import { plainTerminal, processTerminal, type Terminal } from './terminal.js';

/** Where CLI commands write; injected so tests can capture output. */
export interface CliIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  /** What the streams behind `stdout` and `stderr` can show (colour, live lines); none given: plain text. */
  terminal?: Terminal;
}

export const processIo: CliIo = {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  // Read at each use, so NO_COLOR set by the caller after start-up still counts.
  get terminal() {
    return processTerminal();
  },
};

/**
 * The terminal behind a writer: `io.terminal` when `io` carries one, the process's when `stdout` is the
 * process's own writer (commands handed only the functions), plain otherwise.
 */
export function terminalOf(io: Pick<CliIo, 'stdout'> & { terminal?: Terminal }): Terminal {
  if (io.terminal) return io.terminal;
  return io.stdout === processIo.stdout ? processTerminal() : plainTerminal;
}

/** Error codes of the CLI's own gateway client (`--url`). */
export const CliErrorCodes = {
  gatewayUnreachable: 'GATEWAY_UNREACHABLE',
  gatewayClosed: 'GATEWAY_CLOSED',
  gatewayConnectFailed: 'GATEWAY_CONNECT_FAILED',
} as const;

/** Exit codes shared by every command. */
export const ExitCodes = {
  ok: 0,
  failure: 1,
  usage: 2,
  unavailable: 3,
} as const;

export function printJson(io: CliIo, value: unknown): void {
  io.stdout(`${JSON.stringify(value, null, 2)}\n`);
}

/** Prints an error as text or as `{ "error": { code, message } }` and returns the exit code to use. */
export function reportError(io: CliIo, error: unknown, json: boolean): number {
  const failure = coerceError(error);
  if (json) printJson(io, { error: failure.toJSON() });
  else io.stderr(`agentd: ${failure.message} (${failure.code})\n`);
  if (AgentdError.isInstance(failure) && failure.fault === 'user') return ExitCodes.usage;
  if (failure.code === CliErrorCodes.gatewayUnreachable || failure.code === ErrorCodes.storeUnavailable)
    return ExitCodes.unavailable;
  return ExitCodes.failure;
}
