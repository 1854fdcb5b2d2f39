/**
 * The sandbox worker thread: one engine (QuickJS or Pyodide), reused for many executions, one at a time.
 * It talks to the host through `parentPort` (runs in, calls and results out) and reads the answers to its
 * tool calls from `replyPort`, synchronously: a program that has nothing left to do but wait for a tool
 * sleeps in `Atomics.wait` and resumes inside the same event-loop turn. Nothing here is reachable from the
 * guest program except the functions that are installed into the engine on purpose (console/print output
 * and the tool bridge).
 */
import { createRequire, syncBuiltinESMExports } from 'node:module';
import { parentPort, receiveMessageOnPort, workerData } from 'node:worker_threads';
import type { QuickJSDeferredPromise } from 'quickjs-emscripten-core';
import type {
  HostToWorker,
  SandboxErrorKind,
  SandboxFile,
  SandboxWorkerData,
  ToolReply,
  WorkerMessage,
} from './protocol.js';

const data = workerData as SandboxWorkerData;
const port = parentPort!;
const now = () => performance.now();
// Kept before `lockDownNodeModules` replaces the module's functions (the import is a live binding).
const receiveReply = receiveMessageOnPort;
const replySignal = new Int32Array(data.replySignal);

interface RunState {
  executionId: string;
  stdout: OutputBuffer;
  stderr: OutputBuffer;
  /** Time spent blocked on tool answers; subtracted from wall time to give the engine's own time. */
  waitedMs: number;
}

interface Outcome {
  ok: boolean;
  resultJson?: string;
  error?: { kind: SandboxErrorKind; message: string; line?: number };
  writtenFiles?: Array<{ path: string; content: string }>;
}

/** Output shared by stdout and stderr of one run: at most `maxBytes` in total, the rest is counted. */
interface OutputBuffer {
  text: string;
}

function createOutput(maxBytes: number) {
  let used = 0;
  let truncated = false;
  const write = (buffer: OutputBuffer, text: string) => {
    if (truncated) return;
    const room = maxBytes - used;
    if (Buffer.byteLength(text) <= room) {
      buffer.text += text;
      used += Buffer.byteLength(text);
      return;
    }
    const cut = Buffer.from(text).subarray(0, Math.max(0, room)).toString();
    buffer.text += `${cut}\n[output truncated at ${maxBytes} bytes]\n`;
    used = maxBytes;
    truncated = true;
  };
  return { write, isTruncated: () => truncated };
}

// Ids run on across executions, so a late answer to a call of an earlier run can never be taken for one
// of this run's.
let nextCallId = 1;
/** Calls of the current run sent to the host and not yet claimed by the program. */
const outstanding = new Set<number>();
/** Answers that arrived while the program was waiting for another one. */
const arrived = new Map<number, ToolReply>();
let current: RunState | undefined;

/** Sends a tool call of the current run to the host without waiting; the answer is claimed by its id. */
function submitCall(name: string, argsJson: string): number | undefined {
  const run = current;
  if (!run) return undefined;
  const callId = nextCallId++;
  outstanding.add(callId);
  send({ type: 'tool-call', executionId: run.executionId, callId, name, argsJson });
  return callId;
}

/**
 * The next answer to any outstanding call, blocking the thread until one comes. The host posts an answer
 * before it moves the signal, so reading the signal first and the port second never misses a wake-up.
 */
function nextReply(): ToolReply {
  const startedAt = now();
  try {
    for (;;) {
      const seen = Atomics.load(replySignal, 0);
      const received = receiveReply(data.replyPort);
      if (received) {
        const reply = received.message as ToolReply;
        // Answers to an earlier run's calls (it ended without awaiting them) are dropped.
        if (outstanding.delete(reply.callId)) return reply;
        continue;
      }
      Atomics.wait(replySignal, 0, seen);
    }
  } finally {
    if (current) current.waitedMs += now() - startedAt;
  }
}

/** The answer to one call, blocking until it is there; answers to other calls are kept for later. */
function claimReply(callId: number): ToolReply {
  for (;;) {
    const kept = arrived.get(callId);
    if (kept) {
      arrived.delete(callId);
      return kept;
    }
    if (!outstanding.has(callId)) return { callId, ok: false, content: 'No such tool call is waiting.' };
    const reply = nextReply();
    if (reply.callId === callId) return reply;
    arrived.set(reply.callId, reply);
  }
}

function send(message: WorkerMessage) {
  port.postMessage(message);
}

/**
 * Removes what a guest could use to act on the host if it ever reached this realm (Pyodide's FFI can see
 * the worker's globals): the environment, process control, network, and code generation from strings,
 * which is the only way from a JavaScript object to `import()` of Node's modules.
 */
function hardenRealm() {
  const forbidden = () => {
    throw new EvalError('code generation is disabled in the sandbox');
  };
  const globals = globalThis as Record<string, unknown>;
  for (const name of [
    'process',
    'fetch',
    'WebSocket',
    'EventSource',
    'XMLHttpRequest',
    'Request',
    'Response',
    'Headers',
    'FormData',
    'require',
    'module',
    'navigator',
    'BroadcastChannel',
  ]) {
    try {
      delete globals[name];
    } catch {
      globals[name] = undefined;
    }
  }
  globals.eval = forbidden;
  const constructors = [
    Function,
    Object.getPrototypeOf(async () => {}).constructor,
    Object.getPrototypeOf(function* () {}).constructor,
    Object.getPrototypeOf(async function* () {}).constructor,
  ] as Array<{ prototype: object }>;
  for (const kind of constructors) {
    Object.defineProperty(kind.prototype, 'constructor', {
      value: forbidden,
      writable: false,
      configurable: false,
    });
  }
  // Same prototype, so `x instanceof Function` (which the engines' glue relies on) keeps working.
  const safeFunction = function blockedFunctionConstructor() {
    throw new EvalError('code generation is disabled in the sandbox');
  };
  Object.defineProperty(safeFunction, 'prototype', { value: Function.prototype });
  globals.Function = safeFunction;
}

/**
 * Pyodide's Emscripten glue keeps its own `require` and calls Node directly for some syscalls: `system()`
 * spawns a shell through child_process, and sockets become `ws` WebSockets (or a listening server). Once
 * the engine is loaded nothing in this thread needs process, file or network access, so every function
 * of those modules is replaced by one that throws, in this thread's module instances only.
 */
function lockDownNodeModules() {
  const require = createRequire(import.meta.url);
  const blocked = (what: string) =>
    function blockedInSandbox() {
      throw new Error(`${what} is not available in the sandbox`);
    };
  if (data.language === 'python') {
    const fromPyodide = createRequire(`${data.pyodideIndexUrl}pyodide.asm.mjs`);
    // Loaded by the same request string the glue uses, so its later `require("ws")` is served from
    // Node's resolve cache without touching the (then blocked) file system.
    fromPyodide('ws');
    const cached = fromPyodide.cache[fromPyodide.resolve('ws')];
    if (cached) {
      const WebSocket = blocked('network access');
      Object.assign(WebSocket, {
        Server: blocked('listening on a socket'),
        WebSocketServer: blocked('listening on a socket'),
      });
      cached.exports = WebSocket;
    }
  }
  for (const name of [
    'child_process',
    'cluster',
    'dgram',
    'dns',
    'dns/promises',
    'fs',
    'fs/promises',
    'http',
    'http2',
    'https',
    'inspector',
    'net',
    'tls',
    'vm',
    'worker_threads',
  ]) {
    const exports = require(`node:${name}`) as Record<string, unknown>;
    for (const key of Object.keys(exports)) {
      if (typeof exports[key] !== 'function') continue;
      try {
        // `system()` reads the status of spawnSync's answer: "not found" gives the guest a clean 127.
        exports[key] =
          name === 'child_process' && key === 'spawnSync'
            ? () => ({ pid: 0, status: 127, signal: null, output: [], stdout: '', stderr: '' })
            : blocked(`${name}.${key}`);
      } catch {
        // A non-writable export cannot be swapped; the realm hardening still keeps guests away from it.
      }
    }
  }
  syncBuiltinESMExports();
}

/**
 * Caps the engine's linear memory. Emscripten turns a failed grow into a NULL malloc, which QuickJS reports
 * as "out of memory" and Python raises as MemoryError, instead of the process growing without bound.
 * QuickJS also has its own heap limit; this is the ceiling under it (its heap plus the module's own data).
 */
function capLinearMemory(maxBytes: number) {
  type WasmMemory = { buffer: ArrayBuffer; grow(pages: number): number };
  const memoryPrototype = (globalThis as unknown as { WebAssembly: { Memory: { prototype: WasmMemory } } })
    .WebAssembly.Memory.prototype;
  const originalGrow = memoryPrototype.grow;
  memoryPrototype.grow = function grow(this: WasmMemory, pages: number) {
    if (this.buffer.byteLength + pages * 65_536 > maxBytes) {
      throw new RangeError('sandbox memory limit reached');
    }
    return originalGrow.call(this, pages);
  };
}

// --- JavaScript (QuickJS) -----------------------------------------------------------------------------

async function createJavaScriptEngine() {
  const { newQuickJSWASMModuleFromVariant } = await import('quickjs-emscripten-core');
  const variant = (await import('@jitl/quickjs-wasmfile-release-sync')).default as unknown as Parameters<
    typeof newQuickJSWASMModuleFromVariant
  >[0];
  const quickjs = await newQuickJSWASMModuleFromVariant(variant);

  // Kept on the host side of the bridge: the guest sees only `tools`, `console` and plain data.
  const prelude = `
    const call = globalThis.__agentd_call;
    delete globalThis.__agentd_call;
    const format = (value) => typeof value === 'string' ? value : (() => {
      try { return JSON.stringify(value) ?? String(value); } catch { return String(value); }
    })();
    const emit = globalThis.__agentd_emit;
    delete globalThis.__agentd_emit;
    const line = (stream) => (...args) => emit(stream, args.map(format).join(' ') + '\\n');
    globalThis.console = Object.freeze({
      log: line(1), info: line(1), debug: line(1), warn: line(2), error: line(2),
    });
    class ToolError extends Error { constructor(message) { super(message); this.name = 'ToolError'; } }
    globalThis.ToolError = ToolError;
    globalThis.tools = new Proxy(Object.freeze({}), {
      get(_target, name) {
        if (typeof name !== 'string' || name === 'then') return undefined;
        return async (args) => {
          const json = JSON.stringify(args === undefined ? {} : args);
          // The bridge's promise rejects with the tool's message when the call failed or was refused.
          try { return await call(name, json); } catch (message) { throw new ToolError(message); }
        };
      },
    });
  `;

  const filesPrelude = (files: SandboxFile[]) => `
    const granted = new Map(${JSON.stringify(files.map((file) => [file.path, file]))});
    const written = new Map();
    globalThis.files = Object.freeze({
      list: () => [...granted.keys()],
      read(path) {
        if (written.has(path)) return written.get(path);
        const file = granted.get(path);
        if (!file) throw new Error('No such file: ' + path);
        return file.content;
      },
      write(path, content) {
        if (!granted.get(path)?.writable) throw new Error(path + ' is not writable');
        written.set(path, String(content));
      },
    });
    Object.defineProperty(globalThis, '__agentd_written', { value: () => JSON.stringify([...written]) });
  `;

  return async (
    code: string,
    run: RunState,
    output: ReturnType<typeof createOutput>,
    files: SandboxFile[],
  ): Promise<Outcome> => {
    const runtime = quickjs.newRuntime();
    runtime.setMemoryLimit(data.memoryLimitBytes);
    runtime.setMaxStackSize(data.maxStackBytes);
    const vm = runtime.newContext();
    const pending = new Map<number, QuickJSDeferredPromise>();
    try {
      const emit = vm.newFunction('emit', (stream, text) => {
        const value = vm.getString(text);
        output.write(vm.getNumber(stream) === 2 ? run.stderr : run.stdout, value);
      });
      vm.setProp(vm.global, '__agentd_emit', emit);
      emit.dispose();
      // Sends the call and hands the guest a promise; the drive loop below settles it when the answer
      // comes. Not waiting here keeps `Promise.all` over several tools concurrent on the host.
      const bridge = vm.newFunction('call', (name, args) => {
        const deferred = vm.newPromise();
        const callId = submitCall(vm.getString(name), vm.getString(args));
        if (callId === undefined) {
          const message = vm.newString('No execution is running.');
          deferred.reject(message);
          message.dispose();
        } else pending.set(callId, deferred);
        return deferred.handle;
      });
      const settle = (reply: ToolReply) => {
        const deferred = pending.get(reply.callId);
        if (!deferred) return;
        pending.delete(reply.callId);
        const text = vm.newString(reply.content);
        if (reply.ok) deferred.resolve(text);
        else deferred.reject(text);
        text.dispose();
        deferred.dispose();
      };
      vm.setProp(vm.global, '__agentd_call', bridge);
      bridge.dispose();
      vm.unwrapResult(vm.evalCode(prelude, 'prelude.js')).dispose();
      if (files.length) vm.unwrapResult(vm.evalCode(filesPrelude(files), 'files.js')).dispose();
      const writtenFiles = () => {
        if (!files.length) return [];
        const handle = vm.evalCode('__agentd_written()');
        if (handle.error) {
          handle.error.dispose();
          return [];
        }
        const entries = JSON.parse(vm.getString(handle.value)) as Array<[string, string]>;
        handle.value.dispose();
        return entries.map(([path, content]) => ({ path, content }));
      };

      // One line: the program's line numbers are the ones the model wrote.
      const wrapped = `(async () => { ${code}\n})().then((value) => JSON.stringify(value === undefined ? null : value))`;
      const evaluated = vm.evalCode(wrapped, 'code.js');
      if (evaluated.error) return { ok: false, error: consumeError(vm, evaluated.error) };
      const promise = evaluated.value;
      try {
        // The program runs in this loop, synchronously: its jobs until it waits on tools, then the thread
        // sleeps until the host answers one, which settles that call's promise and lets it go on.
        for (;;) {
          const jobs = runtime.executePendingJobs();
          if (jobs.error) {
            // A job threw past its promise; the queue stopped there, so run the rest before deciding.
            jobs.error.dispose();
            continue;
          }
          const state = vm.getPromiseState(promise);
          if (state.type === 'rejected')
            return { ok: false, error: consumeError(vm, state.error), writtenFiles: writtenFiles() };
          if (state.type === 'fulfilled') {
            const json = vm.getString(state.value);
            state.value.dispose();
            return { ok: true, resultJson: json, writtenFiles: writtenFiles() };
          }
          if (pending.size === 0) {
            // QuickJS has no timers: with no tool call to wait for, nothing can ever settle the program.
            return {
              ok: false,
              error: {
                kind: 'exception',
                message: 'Error: the program awaits a promise that nothing can settle',
              },
              writtenFiles: writtenFiles(),
            };
          }
          settle(nextReply());
        }
      } finally {
        promise.dispose();
      }
    } finally {
      for (const deferred of pending.values()) deferred.dispose();
      vm.dispose();
      runtime.dispose();
    }
  };
}

function consumeError(vm: { dump(handle: unknown): unknown }, handle: { dispose(): void }) {
  const error = javascriptError(vm.dump(handle));
  handle.dispose();
  return error;
}

function javascriptError(dumped: unknown): NonNullable<Outcome['error']> {
  const error = (dumped ?? {}) as { name?: string; message?: string; stack?: string };
  const name = error.name ?? 'Error';
  const message = `${name}: ${error.message ?? String(dumped)}`;
  const line = /code\.js:(\d+)/.exec(error.stack ?? '')?.[1];
  const kind: SandboxErrorKind =
    name === 'SyntaxError' ? 'syntax' : /out of memory/i.test(message) ? 'memory' : 'exception';
  return { kind, message, ...(line ? { line: Number(line) } : {}) };
}

// --- Python (Pyodide) ---------------------------------------------------------------------------------

async function createPythonEngine() {
  const { loadPyodide } = await import('pyodide');
  let sink: ((stream: 1 | 2, text: string) => void) | undefined;
  const decoder = new TextDecoder();
  const pyodide = await loadPyodide({
    indexURL: data.pyodideIndexUrl,
    env: { HOME: '/home/sandbox' },
    stdin: () => null,
    checkAPIVersion: true,
  });
  const writer = (stream: 1 | 2) => ({
    write: (bytes: Uint8Array) => {
      sink?.(stream, decoder.decode(bytes));
      return bytes.length;
    },
  });
  pyodide.setStdout(writer(1));
  pyodide.setStderr(writer(2));

  // Synchronous on purpose: the Python side sends, then blocks for its answer, so a call costs no turn of
  // the event loop. The answer is the content behind '1' (the tool succeeded) or '0' (it failed).
  pyodide.registerJsModule('_agentd_host', {
    submit: (name: string, argsJson: string) => submitCall(name, argsJson) ?? -1,
    claim: (callId: number) => {
      const reply = claimReply(callId);
      return (reply.ok ? '1' : '0') + reply.content;
    },
  });
  pyodide.runPython(`
import asyncio as _asyncio, json as _json, sys as _sys, traceback as _traceback
from pyodide.code import eval_code_async as _eval_code_async
import _agentd_host

class ToolError(Exception):
    pass

def _agentd_tools(host_submit, host_claim):
    class _Tools:
        __slots__ = ()
        def __getattr__(self, name):
            if name.startswith('_'):
                raise AttributeError(name)
            async def call(*args, **kwargs):
                if len(args) > 1 or (args and not isinstance(args[0], dict)):
                    raise TypeError(f'tools.{name} takes keyword arguments or one dict')
                payload = dict(args[0]) if args else {}
                payload.update(kwargs)
                call_id = host_submit(name, _json.dumps(payload))
                if call_id < 0:
                    raise ToolError('No execution is running.')
                if len(_asyncio.all_tasks()) > 1:
                    # Other tasks (asyncio.gather over tools) get to send their calls before this one
                    # blocks, so the host still runs them at the same time.
                    await _asyncio.sleep(0)
                reply = host_claim(call_id)
                if reply[0] != '1':
                    raise ToolError(reply[1:])
                return reply[1:]
            return call
    return _Tools()

_sys.setrecursionlimit(${Number(data.recursionLimit)})
_agentd_clean_modules = set(_sys.modules)
_agentd_state = {'tools': _agentd_tools(_agentd_host.submit, _agentd_host.claim), 'ToolError': ToolError}
del _agentd_host

def _agentd_error(error):
    frames = [f for f in _traceback.extract_tb(error.__traceback__) if f.filename == '<code>']
    line = getattr(error, 'lineno', None) if isinstance(error, SyntaxError) else (frames[-1].lineno if frames else None)
    kind = 'syntax' if isinstance(error, SyntaxError) else 'memory' if isinstance(error, MemoryError) else 'exception'
    text = ''.join(_traceback.format_exception_only(type(error), error)).strip()
    return _json.dumps({'kind': kind, 'message': text, 'line': line})

async def _agentd_run(code):
    scope = {'__name__': '__main__', '__builtins__': __builtins__, **_agentd_state}
    try:
        try:
            value = await _eval_code_async(code, scope, filename='<code>')
        except BaseException as error:
            return _json.dumps({'ok': False, 'error': _json.loads(_agentd_error(error))})
        try:
            result = _json.dumps(value)
        except (TypeError, ValueError):
            result = _json.dumps(repr(value))
        return _json.dumps({'ok': True, 'result': result})
    finally:
        for name in set(_sys.modules) - _agentd_clean_modules:
            del _sys.modules[name]
`);
  // Imported above; from here on no guest import can reach JavaScript or the host file system.
  pyodide.unregisterJsModule('_agentd_host');
  pyodide.unregisterJsModule('js');
  pyodide.unregisterJsModule('pyodide_js');
  pyodide.runPython(`
for _name in [n for n in _sys.modules if n.split('.')[0] in ('js', 'pyodide_js', '_agentd_host')]:
    del _sys.modules[_name]
_agentd_clean_modules = set(_sys.modules)
`);
  const filesystems = (pyodide.FS as { filesystems: Record<string, unknown> }).filesystems;
  for (const name of Object.keys(filesystems)) if (name !== 'MEMFS') delete filesystems[name];
  const runner = pyodide.globals.get('_agentd_run') as (code: string) => Promise<string>;
  const FS = pyodide.FS as {
    mkdirTree(path: string): void;
    writeFile(path: string, content: string): void;
    readFile(path: string, options: { encoding: 'utf8' }): string;
    analyzePath(path: string): { exists: boolean };
    rmdir(path: string): void;
    readdir(path: string): string[];
    unlink(path: string): void;
    isDir(mode: number): boolean;
    stat(path: string): { mode: number };
  };
  const workspace = '/workspace';
  const removeTree = (path: string) => {
    if (!FS.analyzePath(path).exists) return;
    for (const entry of FS.readdir(path)) {
      if (entry === '.' || entry === '..') continue;
      const child = `${path}/${entry}`;
      if (FS.isDir(FS.stat(child).mode)) removeTree(child);
      else FS.unlink(child);
    }
    FS.rmdir(path);
  };

  return async (
    code: string,
    run: RunState,
    output: ReturnType<typeof createOutput>,
    files: SandboxFile[],
  ): Promise<Outcome> => {
    sink = (stream, text) => output.write(stream === 2 ? run.stderr : run.stdout, text);
    removeTree(workspace);
    FS.mkdirTree(workspace);
    for (const file of files) {
      const target = `${workspace}/${file.path}`;
      FS.mkdirTree(target.slice(0, target.lastIndexOf('/')));
      FS.writeFile(target, file.content);
    }
    try {
      const reply = JSON.parse(await runner(code)) as
        | { ok: true; result: string }
        | { ok: false; error: { kind: SandboxErrorKind; message: string; line: number | null } };
      const writtenFiles = files
        .filter((file) => file.writable)
        .flatMap((file) => {
          const target = `${workspace}/${file.path}`;
          if (!FS.analyzePath(target).exists) return [];
          const content = FS.readFile(target, { encoding: 'utf8' });
          return content === file.content ? [] : [{ path: file.path, content }];
        });
      if (reply.ok) return { ok: true, resultJson: reply.result, writtenFiles };
      const { line, ...error } = reply.error;
      return { ok: false, error: { ...error, ...(line !== null ? { line } : {}) }, writtenFiles };
    } finally {
      sink = undefined;
    }
  };
}

// --- the loop -----------------------------------------------------------------------------------------

type Engine = (
  code: string,
  run: RunState,
  output: ReturnType<typeof createOutput>,
  files: SandboxFile[],
) => Promise<Outcome>;

async function main() {
  const startedAt = now();
  capLinearMemory(
    data.language === 'javascript' ? data.memoryLimitBytes + 32 * 2 ** 20 : data.memoryLimitBytes,
  );
  const engine: Engine =
    data.language === 'javascript' ? await createJavaScriptEngine() : await createPythonEngine();
  lockDownNodeModules();
  hardenRealm();

  port.on('message', (message: HostToWorker) => void execute(message));
  send({ type: 'ready', initMs: now() - startedAt });

  async function execute(message: Extract<HostToWorker, { type: 'run' }>) {
    const run: RunState = {
      executionId: message.executionId,
      stdout: { text: '' },
      stderr: { text: '' },
      waitedMs: 0,
    };
    current = run;
    const output = createOutput(message.maxOutputBytes);
    const startedAt = now();
    let outcome: Outcome;
    try {
      outcome = await engine(message.code, run, output, message.files);
    } catch (error) {
      const text = String((error as Error)?.message ?? error);
      outcome = {
        ok: false,
        error: { kind: /memory/i.test(text) ? 'memory' : 'crash', message: text },
      };
    }
    current = undefined;
    outstanding.clear();
    arrived.clear();
    if (
      outcome.ok &&
      outcome.resultJson !== undefined &&
      outcome.resultJson.length > message.maxResultBytes
    ) {
      outcome = {
        ok: false,
        error: {
          kind: 'result',
          message: `The result is ${outcome.resultJson.length} bytes of JSON, over the ${message.maxResultBytes}-byte limit; return less (print the rest, or summarise).`,
        },
      };
    }
    send({
      type: 'done',
      executionId: run.executionId,
      ok: outcome.ok,
      ...(outcome.resultJson !== undefined ? { resultJson: outcome.resultJson } : {}),
      ...(outcome.error ? { error: outcome.error } : {}),
      stdout: run.stdout.text,
      stderr: run.stderr.text,
      outputTruncated: output.isTruncated(),
      cpuMs: Math.max(0, now() - startedAt - run.waitedMs),
      writtenFiles: outcome.writtenFiles ?? [],
    });
  }
}

void main();
