import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { ErrorCodes, UserInputError } from '../../util/index.js';

/** Longer patterns buy nothing a model needs and grow the matcher's state (RE2 time is pattern × text). */
export const maxGrepPatternChars = 1000;

/**
 * Compiles a model-supplied pattern with RE2 (linear time: no catastrophic backtracking). Lookaround and
 * backreferences do not exist in RE2; they are refused with a clear message instead of being emulated.
 */
export async function compileGrepPattern(
  pattern: string,
  options: { fixedString: boolean; ignoreCase: boolean },
) {
  if (pattern.length > maxGrepPatternChars)
    throw new UserInputError({
      code: ErrorCodes.invalidRequest,
      message: `The pattern is ${pattern.length} characters; the limit is ${maxGrepPatternChars}.`,
    });
  // Loaded by the first search rather than by every runtime: RE2 is a quarter megabyte of JavaScript.
  const { RE2JS, RE2JSSyntaxException } = await import('re2js');
  const source = options.fixedString ? RE2JS.quote(pattern) : pattern;
  try {
    return RE2JS.compile(source, options.ignoreCase ? RE2JS.CASE_INSENSITIVE : 0);
  } catch (error) {
    if (!(error instanceof RE2JSSyntaxException)) throw error;
    throw new UserInputError({
      code: ErrorCodes.invalidRequest,
      message: `Invalid regular expression: ${error.message}. grep uses RE2 syntax: lookahead, lookbehind and backreferences are not supported.`,
      details: { pattern },
    });
  }
}

export interface GrepJob {
  source: string;
  ignoreCase: boolean;
  /** Files to scan, in order: the name shown in results and the absolute path to read. */
  files: Array<{ shown: string; absolute: string }>;
  maxFileBytes: number;
  limit: number;
}

export type GrepOutcome =
  | { kind: 'done'; matches: string[]; stoppedAtLimit: boolean }
  | { kind: 'timeout'; matches: string[] }
  | { kind: 'aborted' };

/*
 * The worker body is plain CommonJS so it runs the same from src/ (tests) and dist/ (the CLI) without a
 * TypeScript loader. It reads and matches the files itself, so neither the reading nor the matching ever
 * runs on the gateway's event loop; partial matches are posted as they come so a timeout keeps them.
 */
const workerSource = `
const { parentPort, workerData } = require('node:worker_threads');
const { closeSync, constants, fstatSync, openSync, readFileSync } = require('node:fs');
const { RE2JS } = require(workerData.re2Path);
const job = workerData.job;
const matcher = RE2JS.compile(job.source, job.ignoreCase ? RE2JS.CASE_INSENSITIVE : 0);
const matches = [];
let stoppedAtLimit = false;
outer: for (const file of job.files) {
  let buffer;
  try {
    // Non-blocking and checked on the descriptor: a file swapped for a FIFO since the listing would block
    // this thread in the read, beyond the reach of the deadline's terminate().
    const fd = openSync(file.absolute, constants.O_RDONLY | constants.O_NONBLOCK);
    try {
      const info = fstatSync(fd);
      if (!info.isFile() || info.size > job.maxFileBytes) continue;
      buffer = readFileSync(fd);
    } finally { closeSync(fd); }
  } catch { continue; }
  if (buffer.subarray(0, 8000).includes(0)) continue;
  const lines = buffer.toString('utf8').split('\\n');
  for (let index = 0; index < lines.length; index++) {
    if (!matcher.matcher(lines[index]).find()) continue;
    const line = file.shown + ':' + (index + 1) + ': ' + lines[index].slice(0, 500);
    matches.push(line);
    parentPort.postMessage({ type: 'match', line });
    if (matches.length === job.limit) { stoppedAtLimit = true; break outer; }
  }
}
parentPort.postMessage({ type: 'done', stoppedAtLimit });
`;

const re2Path = createRequire(import.meta.url).resolve('re2js');

/**
 * Runs one search in a worker thread with a hard time limit: the worker is terminated at the deadline or
 * on abort, whatever the pattern and the files do, so the event loop is never held by a search.
 */
export function runGrepJob(
  job: GrepJob,
  options: { timeoutMs: number; signal: AbortSignal },
): Promise<GrepOutcome> {
  if (options.signal.aborted) return Promise.resolve({ kind: 'aborted' });
  return new Promise((resolve, reject) => {
    const worker = new Worker(workerSource, { eval: true, workerData: { job, re2Path } });
    const matches: string[] = [];
    let settled = false;
    const finish = (outcome: GrepOutcome | Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.signal.removeEventListener('abort', onAbort);
      void worker.terminate();
      if (outcome instanceof Error) reject(outcome);
      else resolve(outcome);
    };
    const timer = setTimeout(() => finish({ kind: 'timeout', matches }), options.timeoutMs);
    const onAbort = () => finish({ kind: 'aborted' });
    options.signal.addEventListener('abort', onAbort, { once: true });
    worker.on(
      'message',
      (message: { type: 'match'; line: string } | { type: 'done'; stoppedAtLimit: boolean }) => {
        if (message.type === 'match') matches.push(message.line);
        else finish({ kind: 'done', matches, stoppedAtLimit: message.stoppedAtLimit });
      },
    );
    worker.on('error', (error) => finish(error));
    worker.on('exit', (code) => {
      if (!settled) finish(new Error(`the search worker exited with code ${code}`));
    });
  });
}
