import { pino } from 'pino';
import type { Logger } from '../util/index.js';
import type { LogRing } from './log-ring.js';
import type { Redactor } from './redact.js';

export interface CreateLoggerOptions {
  level?: string;
  redactor: Redactor;
  /** Defaults to stderr so stdout stays clean for `--json` output. */
  destination?: NodeJS.WritableStream;
  bindings?: Record<string, unknown>;
  /** Also keeps every (redacted) line written here, for `logs.tail`. */
  ring?: LogRing;
}

/** pino JSON logs; every argument is passed through the redactor before it is serialized. */
export function createLogger(options: CreateLoggerOptions): Logger {
  const { redactor } = options;
  const base = pino(
    {
      level: options.level ?? 'info',
      base: { service: 'agentd', ...options.bindings },
      serializers: { err: (error: unknown) => redactor.redactValue(serializeError(error)) },
      hooks: {
        logMethod(args, method) {
          const redacted = args.map((arg) => redactor.redactValue(arg)) as Parameters<typeof method>;
          method.apply(this, redacted);
        },
      },
    },
    tee((options.destination ?? process.stderr) as pino.DestinationStream, options.ring),
  );
  return wrap(base, redactor);
}

/** The destination, and the ring when there is one; lines reach both already redacted and serialized. */
function tee(destination: pino.DestinationStream, ring: LogRing | undefined): pino.DestinationStream {
  if (!ring) return destination;
  return {
    write(line: string) {
      ring.write(line);
      return destination.write(line);
    },
  };
}

function serializeError(error: unknown): unknown {
  if (!(error instanceof Error)) return error;
  return {
    type: error.name,
    message: error.message,
    code: (error as { code?: unknown }).code,
    stack: error.stack,
  };
}

function wrap(instance: pino.Logger, redactor: Redactor): Logger {
  return {
    debug: (object, message) => instance.debug(object, message),
    info: (object, message) => instance.info(object, message),
    warn: (object, message) => instance.warn(object, message),
    error: (object, message) => instance.error(object, message),
    child: (bindings) => new LazyChildLogger(instance, bindings, redactor),
  };
}

/**
 * A child logger made at its first line that its parent's level lets through: the engage loop makes one
 * per run (per chat turn) and the gateway one per connection, most of which write nothing at the usual
 * levels, and pino serializes a child's bindings when it is made. A class, so that each of them is one small
 * object rather than five closures.
 */
class LazyChildLogger implements Logger {
  #made: Logger | undefined;

  constructor(
    private readonly parent: pino.Logger,
    private readonly bindings: Record<string, unknown>,
    private readonly redactor: Redactor,
  ) {}

  #child(): Logger {
    // Bindings skip the logMethod hook: they are redacted here, as every line's arguments are.
    this.#made ??= wrap(
      this.parent.child(this.redactor.redactValue(this.bindings) as Record<string, unknown>),
      this.redactor,
    );
    return this.#made;
  }

  debug(object: Record<string, unknown>, message?: string): void {
    if (this.parent.isLevelEnabled('debug')) this.#child().debug(object, message);
  }

  info(object: Record<string, unknown>, message?: string): void {
    if (this.parent.isLevelEnabled('info')) this.#child().info(object, message);
  }

  warn(object: Record<string, unknown>, message?: string): void {
    if (this.parent.isLevelEnabled('warn')) this.#child().warn(object, message);
  }

  error(object: Record<string, unknown>, message?: string): void {
    if (this.parent.isLevelEnabled('error')) this.#child().error(object, message);
  }

  child(more: Record<string, unknown>): Logger {
    return this.#child().child(more);
  }
}
