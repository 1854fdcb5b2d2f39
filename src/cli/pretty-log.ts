import { Writable } from 'node:stream';

/** pino's numeric levels by name, for the label of a line. */
const levelNames: Record<number, string> = {
  10: 'TRACE',
  20: 'DEBUG',
  30: 'INFO',
  40: 'WARN',
  50: 'ERROR',
  60: 'FATAL',
};
const levelColors: Record<number, string> = { 40: '\u001b[33m', 50: '\u001b[31m', 60: '\u001b[31m' };
const dim = '\u001b[2m';
const reset = '\u001b[0m';

/** Fields every line has or that the label already shows. */
const shown = new Set(['level', 'time', 'msg', 'service', 'component', 'pid', 'hostname']);

export interface PrettyLogOptions {
  /** ANSI colours: for a terminal, and only when NO_COLOR is unset (see `wantsColor`). */
  color: boolean;
}

/** Whether output to `stream` may be coloured: a terminal, and NO_COLOR (https://no-color.org) unset. */
export function wantsColor(stream: { isTTY?: boolean }, env: NodeJS.ProcessEnv = process.env): boolean {
  return stream.isTTY === true && (env.NO_COLOR === undefined || env.NO_COLOR === '');
}

function formatValue(value: unknown): string {
  if (typeof value === 'string') return /[\s"=]/.test(value) ? JSON.stringify(value) : value;
  if (value !== null && typeof value === 'object' && 'message' in value && 'type' in value)
    return JSON.stringify(`${(value as { type: string }).type}: ${(value as { message: string }).message}`);
  return JSON.stringify(value);
}

/** One pino JSON line as `12:00:01 INFO  store  applied migration version=1 name=core`. */
export function formatLogLine(line: string, options: PrettyLogOptions): string {
  let record: Record<string, unknown>;
  try {
    record = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line;
  }
  const level = typeof record.level === 'number' ? record.level : 30;
  const time =
    typeof record.time === 'number' ? new Date(record.time).toTimeString().slice(0, 8) : '--:--:--';
  const label = (levelNames[level] ?? String(level)).padEnd(5);
  const component = typeof record.component === 'string' ? `${record.component}  ` : '';
  const fields = Object.entries(record)
    .filter(([key]) => !shown.has(key))
    .map(([key, value]) => `${key}=${formatValue(value)}`)
    .join(' ');
  const text = `${String(record.msg ?? '')}${fields ? ` ${fields}` : ''}`;
  if (!options.color) return `${time} ${label} ${component}${text}`;
  const color = levelColors[level] ?? '';
  return `${dim}${time}${reset} ${color}${label}${color ? reset : ''} ${dim}${component}${reset}${text}`;
}

/** A log destination that writes each JSON line to `out` in the readable form. */
export function createPrettyLogStream(out: NodeJS.WritableStream, options: PrettyLogOptions): Writable {
  let pending = '';
  return new Writable({
    write(chunk, _encoding, done) {
      pending += String(chunk);
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) if (line.trim()) out.write(`${formatLogLine(line, options)}\n`);
      done();
    },
    final(done) {
      if (pending.trim()) out.write(`${formatLogLine(pending, options)}\n`);
      done();
    },
  });
}

/**
 * `createRuntime`'s log destination for a command run by a person: readable lines when stderr is a
 * terminal (JSON stays the format for files, pipes and log collectors, and with AGENTD_LOG_FORMAT=json).
 */
export function terminalLogDestination(
  stderr: NodeJS.WriteStream = process.stderr,
  env: NodeJS.ProcessEnv = process.env,
): { logDestination?: Writable } {
  if (!stderr.isTTY || env.AGENTD_LOG_FORMAT === 'json') return {};
  return { logDestination: createPrettyLogStream(stderr, { color: wantsColor(stderr, env) }) };
}
