import type { MessagePort } from 'node:worker_threads';
import { z } from 'zod';

/** Languages `execute_code` runs. */
export const sandboxLanguages = ['javascript', 'python'] as const;
export type SandboxLanguage = (typeof sandboxLanguages)[number];

/** Fixed for the life of a worker (it is passed as workerData). */
export interface SandboxWorkerData {
  language: SandboxLanguage;
  /** Linear-memory cap of the engine (QuickJS heap, Pyodide's wasm memory). */
  memoryLimitBytes: number;
  /** QuickJS native stack; deep JavaScript recursion ends with a RangeError here. */
  maxStackBytes: number;
  /** Python's `sys.setrecursionlimit`. */
  recursionLimit: number;
  /** Folder holding pyodide.asm.wasm and python_stdlib.zip. */
  pyodideIndexUrl: string;
  /**
   * The answers to tool calls travel on their own port, which the worker reads synchronously
   * (`receiveMessageOnPort`) while it sleeps in `Atomics.wait` on `replySignal`; the host bumps the
   * signal's first Int32 after every answer. So a program waiting for a tool wakes without a turn of the
   * worker's event loop, which is most of what a message round trip costs.
   */
  replyPort: MessagePort;
  replySignal: SharedArrayBuffer;
}

/** A tool call's answer, on `replyPort`. */
export interface ToolReply {
  callId: number;
  ok: boolean;
  content: string;
}

/** A file of the virtual workspace: granted by policy, copied in before a run. */
export interface SandboxFile {
  path: string;
  content: string;
  writable: boolean;
}

export interface HostToWorker {
  type: 'run';
  executionId: string;
  code: string;
  maxOutputBytes: number;
  maxResultBytes: number;
  files: SandboxFile[];
}

export type SandboxErrorKind = 'syntax' | 'exception' | 'memory' | 'timeout' | 'result' | 'limit' | 'crash';

/**
 * Everything a worker sends is checked: a program cannot reach `postMessage` itself, but the worker is the
 * side that runs untrusted code, so its messages are treated as untrusted input all the same.
 */
export const workerMessageSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('ready'), initMs: z.number() }),
  z.object({
    type: z.literal('tool-call'),
    executionId: z.string(),
    callId: z.number().int(),
    name: z.string().max(200),
    argsJson: z.string(),
  }),
  z.object({
    type: z.literal('done'),
    executionId: z.string(),
    ok: z.boolean(),
    resultJson: z.string().optional(),
    error: z
      .object({
        kind: z.enum(['syntax', 'exception', 'memory', 'timeout', 'result', 'limit', 'crash']),
        message: z.string(),
        line: z.number().int().optional(),
      })
      .optional(),
    stdout: z.string(),
    stderr: z.string(),
    outputTruncated: z.boolean(),
    cpuMs: z.number(),
    writtenFiles: z.array(z.object({ path: z.string(), content: z.string() })),
  }),
]);

export type WorkerMessage = z.output<typeof workerMessageSchema>;
export type WorkerDone = Extract<WorkerMessage, { type: 'done' }>;
