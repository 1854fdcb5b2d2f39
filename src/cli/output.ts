import { AgentdError, coerceError, ErrorCodes } from '../util/index.js';

/** Where CLI commands write; injected so tests can capture output. */
export interface CliIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
}

export const processIo: CliIo = {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
};

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
