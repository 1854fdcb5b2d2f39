import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { MessageChannel, type MessagePort, Worker } from 'node:worker_threads';
import { type Logger, silentLogger } from '../util/index.js';
import {
  type HostToWorker,
  type SandboxErrorKind,
  type SandboxFile,
  type SandboxLanguage,
  type SandboxWorkerData,
  type ToolReply,
  type WorkerDone,
  workerMessageSchema,
} from './protocol.js';

export interface SandboxPoolOptions {
  /** Most workers per language; executions beyond it wait for a free one. */
  maxWorkers?: Partial<Record<SandboxLanguage, number>>;
  /** Engine memory cap (QuickJS heap, Pyodide linear memory). Default 256 MiB. */
  memoryLimitBytes?: number;
  /** QuickJS stack. Default 512 KiB. */
  maxStackBytes?: number;
  /** Python recursion limit. Default 500. */
  recursionLimit?: number;
  /** A worker that is not ready by then is given up (Pyodide needs ~1.3 s on an idle core). */
  startTimeoutMs?: number;
  logger?: Logger;
}

export interface SandboxExecutionRequest {
  language: SandboxLanguage;
  code: string;
  executionId: string;
  timeoutMs: number;
  maxOutputBytes: number;
  maxResultBytes: number;
  files?: SandboxFile[];
  /** Called for every `tools.x(...)` of the program; its answer is what the program sees. */
  onToolCall(name: string, argsJson: string): Promise<{ ok: boolean; content: string }>;
  signal?: AbortSignal;
}

export interface SandboxExecutionResult {
  ok: boolean;
  /** The program's value as JSON (`null` for none). */
  resultJson?: string;
  error?: { kind: SandboxErrorKind; message: string; line?: number };
  stdout: string;
  stderr: string;
  outputTruncated: boolean;
  /** From the run message to the answer; excludes waiting for a worker. */
  wallMs: number;
  /** Time the engine itself ran: wall time minus waits for tool results. */
  cpuMs: number;
  writtenFiles: Array<{ path: string; content: string }>;
  /** True when the run had to start a worker first. */
  coldStart: boolean;
}

export interface SandboxPoolStats {
  workers: Record<SandboxLanguage, { total: number; busy: number }>;
  started: number;
  replaced: number;
}

export interface SandboxPool {
  execute(request: SandboxExecutionRequest): Promise<SandboxExecutionResult>;
  /** Starts one worker of the language ahead of time (idempotent while one is idle). */
  warm(language: SandboxLanguage): Promise<void>;
  stats(): SandboxPoolStats;
  /** Terminates every worker; running executions end with a `crash` error. */
  close(): Promise<void>;
}

interface Slot {
  worker: Worker;
  /** Where answers to tool calls go; see `SandboxWorkerData.replyPort`. */
  replyPort: MessagePort;
  replySignal: Int32Array;
  language: SandboxLanguage;
  ready: Promise<void>;
  busy: boolean;
  onMessage?: (message: unknown) => void;
  onExit?: (reason: { kind: SandboxErrorKind; message: string }) => void;
  exited: boolean;
}

const defaultMaxWorkers: Record<SandboxLanguage, number> = { javascript: 2, python: 1 };

function pyodideIndexUrl(): string {
  const require = createRequire(import.meta.url);
  return `${dirname(require.resolve('pyodide'))}/`;
}

/** In the source tree (tests, tsx) the worker is TypeScript and is loaded through tsx; built, it is plain JS. */
function spawnWorker(workerData: SandboxWorkerData, memoryLimitBytes: number): Worker {
  const here = import.meta.url;
  const fromSource = here.endsWith('.ts');
  const options = {
    workerData,
    transferList: [workerData.replyPort] as MessagePort[],
    // No inherited environment: the provider keys live there.
    env: {},
    stdout: true,
    stderr: true,
    resourceLimits: {
      // The engines' own memory is wasm linear memory, capped separately; this bounds the JS around them.
      maxOldGenerationSizeMb: Math.max(96, Math.ceil(memoryLimitBytes / 2 ** 20 / 2)),
      maxYoungGenerationSizeMb: 16,
      stackSizeMb: 4,
    },
  } as const;
  const url = new URL(fromSource ? './worker.ts' : './worker.js', here);
  const worker = fromSource
    ? new Worker(
        `import('tsx/esm/api').then(({ tsImport }) => tsImport(${JSON.stringify(url.href)}, ${JSON.stringify(here)}))`,
        { ...options, eval: true },
      )
    : new Worker(url, options);
  worker.stdout.resume();
  worker.stderr.resume();
  return worker;
}

export function createSandboxPool(options: SandboxPoolOptions = {}): SandboxPool {
  const logger = options.logger ?? silentLogger;
  const memoryLimitBytes = options.memoryLimitBytes ?? 256 * 2 ** 20;
  const maxWorkers = { ...defaultMaxWorkers, ...options.maxWorkers };
  const startTimeoutMs = options.startTimeoutMs ?? 60_000;
  const slots: Slot[] = [];
  const waiters: Record<SandboxLanguage, Array<() => void>> = { javascript: [], python: [] };
  let indexUrl: string | undefined;
  let started = 0;
  let replaced = 0;
  let closed = false;

  const start = (language: SandboxLanguage): Slot => {
    indexUrl ??= pyodideIndexUrl();
    const replies = new MessageChannel();
    const replySignal = new SharedArrayBuffer(4);
    const worker = spawnWorker(
      {
        language,
        memoryLimitBytes,
        maxStackBytes: options.maxStackBytes ?? 512 * 1024,
        recursionLimit: options.recursionLimit ?? 500,
        pyodideIndexUrl: indexUrl,
        replyPort: replies.port2,
        replySignal,
      },
      memoryLimitBytes,
    );
    started++;
    const slot: Slot = {
      worker,
      replyPort: replies.port1,
      replySignal: new Int32Array(replySignal),
      language,
      busy: false,
      exited: false,
      ready: Promise.resolve(),
    };
    slot.ready = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new Error(`the ${language} sandbox did not start within ${startTimeoutMs} ms`));
        void worker.terminate();
      }, startTimeoutMs);
      timer.unref();
      worker.on('message', (raw: unknown) => {
        const parsed = workerMessageSchema.safeParse(raw);
        if (!parsed.success) {
          logger.warn({ component: 'sandbox' }, 'dropped a malformed message from a sandbox worker');
          return;
        }
        if (parsed.data.type === 'ready') {
          clearTimeout(timer);
          resolve();
          return;
        }
        slot.onMessage?.(parsed.data);
      });
      const onGone = (reason: { kind: SandboxErrorKind; message: string }) => {
        slot.replyPort.close();
        if (slot.exited) return;
        slot.exited = true;
        clearTimeout(timer);
        reject(new Error(reason.message));
        const index = slots.indexOf(slot);
        if (index >= 0) slots.splice(index, 1);
        slot.onExit?.(reason);
        wake(language);
      };
      worker.on('error', (error: Error & { code?: string }) =>
        onGone(
          error.code === 'ERR_WORKER_OUT_OF_MEMORY'
            ? { kind: 'memory', message: 'The sandbox ran out of memory and was stopped.' }
            : { kind: 'crash', message: `The sandbox worker failed: ${error.message}` },
        ),
      );
      worker.on('exit', (code) =>
        onGone({ kind: 'crash', message: `The sandbox worker exited (code ${code}).` }),
      );
    });
    slot.ready.catch(() => {});
    slots.push(slot);
    return slot;
  };

  const wake = (language: SandboxLanguage) => waiters[language].shift()?.();

  const acquire = async (
    language: SandboxLanguage,
    signal?: AbortSignal,
  ): Promise<{ slot: Slot; cold: boolean }> => {
    for (;;) {
      if (closed) throw new Error('the sandbox pool is closed');
      if (signal?.aborted) throw signal.reason;
      const idle = slots.find((slot) => slot.language === language && !slot.busy && !slot.exited);
      if (idle) {
        idle.busy = true;
        return { slot: idle, cold: false };
      }
      if (slots.filter((slot) => slot.language === language).length < maxWorkers[language]) {
        const slot = start(language);
        slot.busy = true;
        return { slot, cold: true };
      }
      await new Promise<void>((resolve) => waiters[language].push(resolve));
    }
  };

  const retire = (slot: Slot) => {
    if (slot.exited) return;
    slot.exited = true;
    const index = slots.indexOf(slot);
    if (index >= 0) slots.splice(index, 1);
    slot.replyPort.close();
    void slot.worker.terminate();
    replaced++;
    // The replacement starts now, so the next execution finds a warm worker.
    if (!closed) {
      const fresh = start(slot.language);
      fresh.ready.then(
        () => wake(slot.language),
        () => {},
      );
    }
    wake(slot.language);
  };

  const execute = async (request: SandboxExecutionRequest): Promise<SandboxExecutionResult> => {
    const { slot, cold } = await acquire(request.language, request.signal);
    try {
      await slot.ready;
    } catch (error) {
      retire(slot);
      return failed(
        { kind: 'crash', message: `The sandbox could not start: ${(error as Error).message}` },
        0,
        cold,
      );
    }
    const startedAt = performance.now();
    return new Promise<SandboxExecutionResult>((resolve) => {
      let settled = false;
      const finish = (result: SandboxExecutionResult, keepWorker: boolean) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        request.signal?.removeEventListener('abort', onAbort);
        slot.onMessage = undefined;
        slot.onExit = undefined;
        if (keepWorker) {
          slot.busy = false;
          wake(request.language);
        } else retire(slot);
        resolve(result);
      };
      const elapsed = () => performance.now() - startedAt;
      const timer = setTimeout(
        () =>
          finish(
            failed(
              {
                kind: 'timeout',
                message: `The program ran past its ${request.timeoutMs} ms time limit and was stopped.`,
              },
              elapsed(),
              cold,
            ),
            false,
          ),
        request.timeoutMs,
      );
      const onAbort = () =>
        finish(failed({ kind: 'crash', message: 'The run was aborted.' }, elapsed(), cold), false);
      request.signal?.addEventListener('abort', onAbort, { once: true });
      slot.onExit = (reason) => finish(failed(reason, elapsed(), cold), false);
      slot.onMessage = (message) => {
        const parsed = message as Exclude<ReturnType<typeof workerMessageSchema.parse>, { type: 'ready' }>;
        if (parsed.executionId !== request.executionId) return;
        if (parsed.type === 'tool-call') {
          const { callId } = parsed;
          const refused = (error: Error) => answer({ callId, ok: false, content: String(error?.message) });
          // The worker sleeps until this call is answered, so even a handler that throws answers it.
          let pending: Promise<{ ok: boolean; content: string }>;
          try {
            pending = request.onToolCall(parsed.name, parsed.argsJson);
          } catch (error) {
            refused(error as Error);
            return;
          }
          void pending.then((reply) => answer({ callId, ok: reply.ok, content: reply.content }), refused);
          return;
        }
        finish(fromDone(parsed, elapsed(), cold), true);
      };
      const answer = (reply: ToolReply) => {
        if (settled) return;
        // Posted before the signal moves, so the woken worker always finds it on the port.
        slot.replyPort.postMessage(reply);
        Atomics.add(slot.replySignal, 0, 1);
        Atomics.notify(slot.replySignal, 0);
      };
      const run: HostToWorker = {
        type: 'run',
        executionId: request.executionId,
        code: request.code,
        maxOutputBytes: request.maxOutputBytes,
        maxResultBytes: request.maxResultBytes,
        files: request.files ?? [],
      };
      slot.worker.postMessage(run);
    });
  };

  return {
    execute,
    async warm(language) {
      const existing = slots.find((slot) => slot.language === language && !slot.exited);
      await (existing ?? start(language)).ready;
    },
    stats() {
      const count = (language: SandboxLanguage) => ({
        total: slots.filter((slot) => slot.language === language).length,
        busy: slots.filter((slot) => slot.language === language && slot.busy).length,
      });
      return { workers: { javascript: count('javascript'), python: count('python') }, started, replaced };
    },
    async close() {
      closed = true;
      const all = slots.splice(0);
      for (const language of ['javascript', 'python'] as const)
        for (const wakeUp of waiters[language].splice(0)) wakeUp();
      await Promise.all(all.map((slot) => slot.worker.terminate()));
    },
  };
}

function failed(
  error: { kind: SandboxErrorKind; message: string },
  wallMs: number,
  coldStart: boolean,
): SandboxExecutionResult {
  return {
    ok: false,
    error,
    stdout: '',
    stderr: '',
    outputTruncated: false,
    wallMs,
    cpuMs: wallMs,
    writtenFiles: [],
    coldStart,
  };
}

function fromDone(done: WorkerDone, wallMs: number, coldStart: boolean): SandboxExecutionResult {
  return {
    ok: done.ok,
    ...(done.resultJson !== undefined ? { resultJson: done.resultJson } : {}),
    ...(done.error ? { error: done.error } : {}),
    stdout: done.stdout,
    stderr: done.stderr,
    outputTruncated: done.outputTruncated,
    wallMs,
    cpuMs: done.cpuMs,
    writtenFiles: done.writtenFiles,
    coldStart,
  };
}
