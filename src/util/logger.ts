/**
 * The logging surface every subsystem takes as an option. pino loggers satisfy it; tests pass
 * `silentLogger` or a recording logger.
 */
export interface Logger {
  debug(object: Record<string, unknown>, message?: string): void;
  info(object: Record<string, unknown>, message?: string): void;
  warn(object: Record<string, unknown>, message?: string): void;
  error(object: Record<string, unknown>, message?: string): void;
  child(bindings: Record<string, unknown>): Logger;
}

/** A logger that drops everything. */
export const silentLogger: Logger = {
  debug: () => {},
  info: () => {},
  warn: () => {},
  error: () => {},
  child: () => silentLogger,
};

export interface RecordedLog {
  level: 'debug' | 'info' | 'warn' | 'error';
  object: Record<string, unknown>;
  message: string | undefined;
}

/** A logger that keeps every line in memory, for assertions in tests. */
export function createRecordingLogger(
  bindings: Record<string, unknown> = {},
  sink: RecordedLog[] = [],
): Logger & {
  records: RecordedLog[];
} {
  const record = (level: RecordedLog['level']) => (object: Record<string, unknown>, message?: string) => {
    sink.push({ level, object: { ...bindings, ...object }, message });
  };
  return {
    records: sink,
    debug: record('debug'),
    info: record('info'),
    warn: record('warn'),
    error: record('error'),
    child: (more) => createRecordingLogger({ ...bindings, ...more }, sink),
  };
}
