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
    child: (bindings) => lazyChild(instance, bindings, redactor),
  };
}

/**
 * A child logger made at its first line that its parent's level lets through: the engage loop makes one
 * per run (per chat turn), most runs write nothing at the usual levels, and pino serializes a child's
 * bindings when it is made.
 */
function lazyChild(parent: pino.Logger, bindings: Record<string, unknown>, redactor: Redactor): Logger {
  let made: Logger | undefined;
  const child = () => {
    // Bindings skip the logMethod hook: they are redacted here, as every line's arguments are.
    made ??= wrap(parent.child(redactor.redactValue(bindings) as Record<string, unknown>), redactor);
    return made;
  };
  return {
    debug: (object, message) => {
      if (parent.isLevelEnabled('debug')) child().debug(object, message);
    },
    info: (object, message) => {
      if (parent.isLevelEnabled('info')) child().info(object, message);
    },
    warn: (object, message) => {
      if (parent.isLevelEnabled('warn')) child().warn(object, message);
    },
    error: (object, message) => {
      if (parent.isLevelEnabled('error')) child().error(object, message);
    },
    child: (more) => child().child(more),
  };
}
