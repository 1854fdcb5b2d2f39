import type { AgentdConfig } from '../config/index.js';
import { ErrorCodes, UserInputError } from '../util/index.js';
import { loadConfigModule } from './lazy-modules.js';

export interface GlobalOptions {
  config?: string;
  home?: string;
  model?: string;
  /** `--log-level` (or $AGENTD_LOG_LEVEL): pino's levels, `silent` for none. */
  logLevel?: string;
}

const logLevels = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** The configuration with the global options (`--config`, `--home`, `--model`) applied. */
export async function configFrom(
  globals: GlobalOptions,
  extra: Partial<Pick<AgentdConfig, 'host' | 'port'>> = {},
  quiet = false,
): Promise<AgentdConfig> {
  const { loadConfig } = await loadConfigModule();
  const config = loadConfig({
    ...(globals.config ? { configPath: globals.config } : {}),
    overrides: {
      ...(globals.home ? { home: globals.home } : {}),
      ...(globals.model ? { model: globals.model } : {}),
      ...extra,
    },
  });
  if (globals.logLevel !== undefined) {
    if (!logLevels.includes(globals.logLevel))
      throw new UserInputError({
        code: ErrorCodes.invalidRequest,
        message: `--log-level must be one of ${logLevels.join(', ')}, got "${globals.logLevel}"`,
      });
    config.logLevel = globals.logLevel;
  } else if (quiet) {
    // One-shot commands keep stderr quiet unless the user asked for a log level.
    config.logLevel = 'warn';
  }
  return config;
}

export function parsePortOption(value: string): number {
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new UserInputError({
      code: ErrorCodes.invalidRequest,
      message: `--port must be 0–65535, got "${value}"`,
    });
  }
  return port;
}

export function parsePositiveInt(name: string) {
  return (value: string): number => {
    const number = Number(value);
    if (!Number.isInteger(number) || number <= 0) {
      throw new UserInputError({
        code: ErrorCodes.invalidRequest,
        message: `${name} must be a positive integer, got "${value}"`,
      });
    }
    return number;
  };
}
