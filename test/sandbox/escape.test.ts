import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createBus } from '../../src/bus/index.js';
import {
  createExecuteCodeTool,
  createSandboxPool,
  type SandboxPool,
  sandboxConfigSchema,
} from '../../src/sandbox/index.js';
import {
  createFileTools,
  createPolicy,
  createToolRegistry,
  defineTool,
  executeToolCall,
  type ToolContext,
} from '../../src/tools/index.js';
import { silentLogger } from '../../src/util/index.js';

const plantedKey = 'sk-planted-provider-key-4f1b9c';
const root = mkdtempSync(join(tmpdir(), 'agentd-sandbox-escape-'));
const workspaceDir = join(root, 'workspace');
mkdirSync(workspaceDir);
writeFileSync(join(workspaceDir, 'notes.txt'), 'granted notes');
writeFileSync(join(workspaceDir, 'draft.txt'), 'first draft');
writeFileSync(join(root, 'outside.txt'), 'parent secret');

let executed: Record<string, number> = {};
const received: unknown[] = [];
const registry = createToolRegistry([
  ...createFileTools({}),
  defineTool({
    name: 'count',
    description: 'counts calls',
    input: z.object({}),
    async execute() {
      executed.count = (executed.count ?? 0) + 1;
      return String(executed.count);
    },
  }),
  defineTool({
    name: 'echo',
    description: 'returns its arguments',
    input: z.record(z.string(), z.unknown()),
    async execute(args) {
      received.push(args);
      return JSON.stringify(args);
    },
  }),
  defineTool({
    name: 'forbidden_tool',
    description: 'denied by policy',
    input: z.object({}),
    async execute() {
      executed.forbidden_tool = (executed.forbidden_tool ?? 0) + 1;
      return 'ran';
    },
  }),
]);
const policy = createPolicy({
  policies: [
    {
      name: 'sandbox-test',
      rules: [{ target: 'tool', target_id: 'forbidden_tool', action: 'deny', reason: 'not for programs' }],
    },
  ],
});
const config = sandboxConfigSchema.parse({
  max_tool_calls: 50,
  max_output_bytes: 4096,
  memory_mib: 128,
  files: [{ path: 'notes.txt' }, { path: 'draft.txt', writable: true }],
});

let pool: SandboxPool;
let sequence = 0;

async function run(language: 'javascript' | 'python', code: string, timeoutMs?: number) {
  const tool = createExecuteCodeTool({ pool, config });
  const context: ToolContext = {
    runId: 'run-escape',
    agentId: 'main',
    workItemId: 'wi-escape',
    toolCallId: `call_${++sequence}`,
    workspaceDir,
    signal: new AbortController().signal,
    bus: createBus(),
    logger: silentLogger,
  };
  context.callTool = (call) =>
    executeToolCall(call, { registry, policy, context: { ...context, toolCallId: call.id } });
  const outcome = await executeToolCall(
    {
      id: context.toolCallId,
      name: 'execute_code',
      arguments: { language, code, ...(timeoutMs ? { timeoutMs } : {}) },
    },
    { registry: createToolRegistry([tool]), policy, context },
  );
  return { ...outcome, report: JSON.parse(outcome.content) as Record<string, any> };
}

let listener: Server;
let connections = 0;
let port = 0;

beforeAll(async () => {
  process.env.OPENAI_API_KEY = plantedKey;
  listener = createServer((socket) => {
    connections++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  port = (listener.address() as { port: number }).port;
  // Generous start timeout: on a loaded CI machine Pyodide's start can take far longer than its ~1.3 s.
  pool = createSandboxPool({ memoryLimitBytes: config.memory_mib * 2 ** 20, startTimeoutMs: 170_000 });
  // One Python worker for the whole file: Pyodide's cold start is the expensive part.
  await Promise.all([pool.warm('python'), pool.warm('javascript')]);
}, 180_000);

afterAll(async () => {
  delete process.env.OPENAI_API_KEY;
  await pool?.close();
  await new Promise<void>((resolve) => listener.close(() => resolve()));
});

describe('the JavaScript sandbox', () => {
  it('has no host file system, process, network or environment', async () => {
    const { report, isError } = await run(
      'javascript',
      `return [typeof require, typeof process, typeof fetch, typeof WebSocket, typeof std, typeof os,
        globalThis.constructor.constructor('return typeof process')()];`,
    );
    expect(isError).toBe(false);
    expect(report.result).toEqual(Array(7).fill('undefined'));
  });

  it('sees only granted files, writes back only writable ones, and cannot reach the parent', async () => {
    const { report } = await run(
      'javascript',
      `files.write('draft.txt', files.read('draft.txt') + ' + edit');
       let parent;
       try { parent = await tools.read_file({ path: '../outside.txt' }); } catch (e) { parent = e.name; }
       let readonly;
       try { files.write('notes.txt', 'x'); } catch (e) { readonly = e.message; }
       return { list: files.list(), notes: files.read('notes.txt'), parent, readonly };`,
    );
    expect(report.result).toEqual({
      list: ['notes.txt', 'draft.txt'],
      notes: 'granted notes',
      parent: 'ToolError',
      readonly: 'notes.txt is not writable',
    });
    expect(report.filesWritten).toEqual(['draft.txt']);
  });

  it('stops an endless loop at the time limit, replaces the worker, and runs the next program', async () => {
    const replacedBefore = pool.stats().replaced;
    const { report, isError } = await run('javascript', 'for (;;) {}', 300);
    expect(isError).toBe(true);
    expect(report.error.kind).toBe('timeout');
    expect(pool.stats().replaced).toBe(replacedBefore + 1);
    expect((await run('javascript', 'return 1')).report.result).toBe(1);
  });

  it('ends at the memory limit without growing the server', async () => {
    const rssBefore = process.memoryUsage().rss;
    const { report } = await run(
      'javascript',
      // 2 GiB in 64 MiB pieces.
      `const chunks = []; for (let i = 0; i < 32; i++) chunks.push(new ArrayBuffer(64 * 2 ** 20)); return chunks.length;`,
      30_000,
    );
    expect(report.error.kind).toBe('memory');
    expect(process.memoryUsage().rss - rssBefore).toBeLessThan(512 * 2 ** 20);
  });

  it('reports deep recursion as an error with its line and keeps the worker', async () => {
    const replacedBefore = pool.stats().replaced;
    const { report } = await run('javascript', 'const f = (n) => f(n + 1);\nreturn f(0);');
    expect(report.error).toMatchObject({ kind: 'exception', message: 'InternalError: stack overflow' });
    expect(pool.stats().replaced).toBe(replacedBefore);
  });

  it('caps 100 MB of output', async () => {
    const { report } = await run(
      'javascript',
      `const line = 'x'.repeat(1_000_000); for (let i = 0; i < 100; i++) console.log(line); return 'done';`,
    );
    expect(report.result).toBe('done');
    expect(report.outputTruncated).toBe(true);
    expect(report.stdout.length).toBeLessThan(5000);
  });

  it('keeps prototype pollution inside the sandbox', async () => {
    received.length = 0;
    const { report } = await run(
      'javascript',
      `Object.prototype.polluted = 'yes';
       Array.prototype.map = () => 'hijacked';
       JSON.parse = () => ({ ok: true, content: 'forged' });
       const payload = JSON.parse('{"__proto__": {"polluted": "deep"}, "constructor": {"prototype": {"polluted": "c"}}}');
       return await tools.echo(payload);`,
    );
    expect(report.toolCalls).toEqual([{ id: expect.any(String), name: 'echo', status: 'ok' }]);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.prototype).not.toHaveProperty('polluted');
    expect([1].map((value) => value + 1)).toEqual([2]);
    expect(Object.getPrototypeOf(received[0])).toBe(Object.prototype);
  });

  it('denies a tool the policy denies, without running it', async () => {
    executed = {};
    const { report } = await run(
      'javascript',
      `try { await tools.forbidden_tool({}); return 'ran'; } catch (e) { return e.name + ': ' + e.message; }`,
    );
    expect(report.result).toMatch(/^ToolError: Policy denied forbidden_tool: not for programs/);
    expect(report.toolCalls[0].status).toBe('denied');
    expect(executed.forbidden_tool).toBeUndefined();
  });

  it('stops a loop of 1,000 tool calls at the cap', async () => {
    executed = {};
    const { report, isError } = await run(
      'javascript',
      `let refused = 0;
       for (let i = 0; i < 1000; i++) { try { await tools.count({}); } catch { refused++; } }
       return refused;`,
    );
    expect(isError).toBe(true);
    expect(report.error.kind).toBe('limit');
    expect(executed.count).toBe(50);
    expect(report.toolCalls).toHaveLength(50);
  });

  it('reports syntax errors and exceptions with their line', async () => {
    expect((await run('javascript', 'const a = 1;\nconst = ;')).report.error).toMatchObject({
      kind: 'syntax',
      line: 2,
    });
    expect((await run('javascript', 'const a = 1;\n\nthrow new TypeError("bad")')).report.error).toEqual({
      kind: 'exception',
      message: 'TypeError: bad',
      line: 3,
    });
  });
});

describe('the Python sandbox', () => {
  it('has no host files, no workspace parent, and only the granted workspace files', async () => {
    const { report } = await run(
      'python',
      `import os
def attempt(path):
    try:
        return open(path).read()
    except OSError as error:
        return type(error).__name__
{"passwd": attempt("/etc/passwd"), "parent": attempt("/workspace/../outside.txt"),
 "host_parent": attempt(${JSON.stringify(join(root, 'outside.txt'))}),
 "notes": open("/workspace/notes.txt").read(), "root": sorted(os.listdir("/"))}`,
    );
    expect(report.result).toEqual({
      passwd: 'FileNotFoundError',
      parent: 'FileNotFoundError',
      host_parent: 'FileNotFoundError',
      notes: 'granted notes',
      root: ['dev', 'home', 'lib', 'proc', 'tmp', 'workspace'],
    });
  });

  it('cannot open sockets or fetch', async () => {
    const { report } = await run(
      'python',
      `import socket, urllib.request
results = []
try:
    socket.create_connection(("127.0.0.1", ${port}), timeout=1)
    results.append("connected")
except OSError as error:
    results.append(type(error).__name__)
try:
    urllib.request.urlopen("http://127.0.0.1:${port}/", timeout=1)
    results.append("fetched")
except Exception as error:
    results.append(type(error).__name__)
results`,
    );
    expect(report.result).toEqual(['OSError', 'URLError']);
    expect(connections).toBe(0);
  });

  it('cannot run processes through os.system or subprocess', async () => {
    const marker = join(root, 'spawned-marker');
    const { report } = await run(
      'python',
      `import os, subprocess
status = os.system("touch ${marker}")
try:
    subprocess.run(["touch", "${marker}"])
    sub = "ran"
except OSError as error:
    sub = type(error).__name__
[status, sub]`,
    );
    expect(report.result).toEqual([127 << 8, 'OSError']);
    expect(existsSync(marker)).toBe(false);
  });

  it('cannot reach JavaScript, the host environment or the provider key', async () => {
    const { report, content } = await run(
      'python',
      `import os, sys
attempts = {}
for name in ("js", "pyodide_js", "_agentd_host"):
    try:
        __import__(name)
        attempts[name] = "imported"
    except ImportError:
        attempts[name] = "blocked"
try:
    from pyodide.code import run_js
    attempts["run_js"] = str(run_js("process.env.OPENAI_API_KEY"))
except Exception as error:
    attempts["run_js"] = type(error).__name__
# JavaScript objects a program can still reach: the tool bridge (in a closure) and one Pyodide keeps.
import pyodide._package_loader
for label, proxy in (("bridge", type(tools).__getattr__.__closure__[0].cell_contents),
                     ("packages", pyodide._package_loader.loadedPackages.constructor)):
    try:
        attempts[label] = str(proxy.constructor("return process.env")())
    except Exception:
        attempts[label] = "blocked"
attempts["modules"] = sorted(n for n in sys.modules if n.split(".")[0] in ("js", "pyodide_js"))
attempts["environ"] = dict(os.environ)
attempts`,
    );
    expect(report.result).toMatchObject({
      js: 'blocked',
      pyodide_js: 'blocked',
      _agentd_host: 'blocked',
      run_js: 'ModuleNotFoundError',
      bridge: 'blocked',
      packages: 'blocked',
      modules: [],
    });
    expect(content).not.toContain(plantedKey);
    expect(report.result.environ.OPENAI_API_KEY).toBeUndefined();
  });

  it('calls tools with keyword arguments and reports policy denials as ToolError', async () => {
    executed = {};
    const { report } = await run(
      'python',
      `echoed = await tools.echo(entry_type="finding", content="x")
try:
    await tools.forbidden_tool()
    denied = "ran"
except ToolError as error:
    denied = str(error)
[echoed, denied]`,
    );
    expect(report.result[0]).toBe('{"entry_type":"finding","content":"x"}');
    expect(report.result[1]).toMatch(/^Policy denied forbidden_tool/);
    expect(executed.forbidden_tool).toBeUndefined();
  });

  it('stops at the tool-call cap', async () => {
    executed = {};
    const { report } = await run(
      'python',
      `for i in range(1000):
    try:
        await tools.count()
    except ToolError:
        pass`,
    );
    expect(report.error.kind).toBe('limit');
    expect(executed.count).toBe(50);
  });

  it('ends at the memory limit, caps output and reports recursion, keeping the worker', async () => {
    const replacedBefore = pool.stats().replaced;
    const rssBefore = process.memoryUsage().rss;
    const memory = await run(
      'python',
      'chunks = [bytearray(64 * 2**20) for _ in range(32)]\nlen(chunks)',
      30_000,
    );
    expect(memory.report.error).toMatchObject({ kind: 'memory', line: 1 });
    expect(process.memoryUsage().rss - rssBefore).toBeLessThan(512 * 2 ** 20);

    const output = await run(
      'python',
      'line = "x" * 1_000_000\nfor _ in range(100):\n    print(line)\n"done"',
    );
    expect(output.report.result).toBe('done');
    expect(output.report.outputTruncated).toBe(true);

    const recursion = await run('python', 'def f(n):\n    return f(n + 1)\nf(0)');
    expect(recursion.report.error).toMatchObject({
      kind: 'exception',
      message: 'RecursionError: maximum recursion depth exceeded',
    });
    const syntax = await run('python', 'x = 1\ndef (:\n');
    expect(syntax.report.error).toMatchObject({ kind: 'syntax', line: 2 });
    expect(pool.stats().replaced).toBe(replacedBefore);
  });

  it('stops an endless loop at the time limit, replaces the worker, and runs the next program', async () => {
    const replacedBefore = pool.stats().replaced;
    const { report } = await run('python', 'while True:\n    pass', 500);
    expect(report.error.kind).toBe('timeout');
    expect(pool.stats().replaced).toBe(replacedBefore + 1);
    expect((await run('python', '6 * 7', 60_000)).report.result).toBe(42);
  }, 180_000);
});
