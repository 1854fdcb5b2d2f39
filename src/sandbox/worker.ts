/**
 * The sandbox worker thread: one engine (QuickJS or Pyodide), reused for many executions, one at a time.
 * It talks to the host only through `parentPort`; tools are called by posting `tool-call` and waiting for
 * the matching `tool-result`. Nothing here is reachable from the guest program except the functions that
 * are installed into the engine on purpose (console/print output and the tool bridge).
 */
import { createRequire, syncBuiltinESMExports } from 'node:module';
import { parentPort, workerData } from 'node:worker_threads';
import type {
  HostToWorker,
  SandboxErrorKind,
  SandboxFile,
  SandboxWorkerData,
  WorkerMessage,
} from './protocol.js';

const data = workerData as SandboxWorkerData;
const port = parentPort!;
const now = () => performance.now();

interface RunState {
  executionId: string;
  stdout: OutputBuffer;
  stderr: OutputBuffer;
  /** Time spent waiting for tool results; subtracted from wall time to give the engine's own time. */
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

let nextCallId = 1;
const pendingCalls = new Map<number, (reply: { ok: boolean; content: string }) => void>();
let current: RunState | undefined;

/** Posts a tool call for the current run; resolves with the host's verdict. */
function callTool(name: string, argsJson: string): Promise<{ ok: boolean; content: string }> {
  const run = current;
  if (!run) return Promise.resolve({ ok: false, content: 'No execution is running.' });
  const callId = nextCallId++;
  const startedAt = now();
  return new Promise((resolve) => {
    pendingCalls.set(callId, (reply) => {
      run.waitedMs += now() - startedAt;
      resolve(reply);
    });
    send({ type: 'tool-call', executionId: run.executionId, callId, name, argsJson });
  });
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
          const reply = JSON.parse(await call(name, JSON.stringify(args === undefined ? {} : args)));
          if (!reply.ok) throw new ToolError(reply.content);
          return reply.content;
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
    const deferreds: Array<{ alive: boolean; dispose(): void }> = [];
    try {
      const emit = vm.newFunction('emit', (stream, text) => {
        const value = vm.getString(text);
        output.write(vm.getNumber(stream) === 2 ? run.stderr : run.stdout, value);
      });
      vm.setProp(vm.global, '__agentd_emit', emit);
      emit.dispose();
      const bridge = vm.newFunction('call', (name, args) => {
        const deferred = vm.newPromise();
        deferreds.push(deferred);
        void callTool(vm.getString(name), vm.getString(args)).then((reply) => {
          if (!deferred.alive) return;
          const text = vm.newString(JSON.stringify(reply));
          deferred.resolve(text);
          text.dispose();
          runtime.executePendingJobs();
        });
        return deferred.handle;
      });
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
      const settled = vm.resolvePromise(promise);
      promise.dispose();
      runtime.executePendingJobs();
      const result = await settled;
      if (result.error)
        return { ok: false, error: consumeError(vm, result.error), writtenFiles: writtenFiles() };
      const json = vm.getString(result.value);
      result.value.dispose();
      return { ok: true, resultJson: json, writtenFiles: writtenFiles() };
    } finally {
      for (const deferred of deferreds) if (deferred.alive) deferred.dispose();
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

  pyodide.registerJsModule('_agentd_host', {
    call: async (name: string, argsJson: string) => JSON.stringify(await callTool(name, argsJson)),
  });
  pyodide.runPython(`
import json as _json, sys as _sys, traceback as _traceback
from pyodide.code import eval_code_async as _eval_code_async
import _agentd_host

class ToolError(Exception):
    pass

def _agentd_tools(host_call):
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
                reply = _json.loads(await host_call(name, _json.dumps(payload)))
                if not reply['ok']:
                    raise ToolError(reply['content'])
                return reply['content']
            return call
    return _Tools()

_sys.setrecursionlimit(${Number(data.recursionLimit)})
_agentd_clean_modules = set(_sys.modules)
_agentd_state = {'tools': _agentd_tools(_agentd_host.call), 'ToolError': ToolError}
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

  port.on('message', (message: HostToWorker) => {
    if (message.type === 'tool-result') {
      const resolve = pendingCalls.get(message.callId);
      pendingCalls.delete(message.callId);
      resolve?.({ ok: message.ok, content: message.content });
      return;
    }
    void execute(message);
  });
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
