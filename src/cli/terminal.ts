import { wantsColor } from './pretty-log.js';

/**
 * What the CLI may do on its output streams. Detected from the process for the real streams
 * (`processTerminal`); tests and embedders pass their own, and any other writer gets `plainTerminal`.
 */
export interface Terminal {
  /** stdout is a terminal and NO_COLOR is unset: tables and results may carry colour. */
  color: boolean;
  /** stderr is a terminal and NO_COLOR is unset: progress markers may carry colour. */
  progressColor: boolean;
  /** stderr is a terminal: progress lines of running tasks are rewritten in place. */
  live: boolean;
}

/** No escape codes of any kind: a file, a pipe, a test's buffer. */
export const plainTerminal: Terminal = { color: false, progressColor: false, live: false };

export function processTerminal(env: NodeJS.ProcessEnv = process.env): Terminal {
  return {
    color: wantsColor(process.stdout, env),
    progressColor: wantsColor(process.stderr, env),
    live: process.stderr.isTTY === true,
  };
}

const codes = {
  green: '\u001b[32m',
  red: '\u001b[31m',
  yellow: '\u001b[33m',
  magenta: '\u001b[35m',
  dim: '\u001b[2m',
} as const;
const reset = '\u001b[0m';

/**
 * The colour of a state word, across work items (`completed`, `dead`), workflow runs (`success`, `failure`)
 * and evaluations (`PASS`, `FAIL`): done is green, failed red, in progress yellow, waiting on someone magenta.
 */
const stateColours: Record<string, keyof typeof codes> = {
  completed: 'green',
  done: 'green',
  success: 'green',
  pass: 'green',
  ok: 'green',
  failed: 'red',
  failure: 'red',
  dead: 'red',
  error: 'red',
  fail: 'red',
  running: 'yellow',
  claimed: 'yellow',
  started: 'yellow',
  partial: 'yellow',
  blocked: 'magenta',
  cancelled: 'dim',
  merged: 'dim',
};

/** `text` (the state itself by default) in the colour of `state` when `enabled`; unchanged otherwise. */
export function paintState(enabled: boolean, state: string, text: string = state): string {
  const colour = stateColours[state.toLowerCase()];
  return enabled && colour ? `${codes[colour]}${text}${reset}` : text;
}

/** The progress markers ▸ ✓ ✗ in the colours of running, done and failed. */
export function paintMarker(enabled: boolean, line: string): string {
  if (!enabled) return line;
  const marker = line[0];
  const state = marker === '✓' ? 'done' : marker === '✗' ? 'failed' : marker === '▸' ? 'running' : undefined;
  return state ? `${paintState(true, state, marker)}${line.slice(1)}` : line;
}
