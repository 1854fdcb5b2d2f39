// The code sandbox: cold and warm start per language, a trivial execution end to end, the cost of a tool
// call made from code against the same call made directly, and 100 tool calls from one program against
// 100 model turns with an instant scripted model. The sandbox is loaded from dist/ (run `npm run build`
// first) so the workers are the plain-JavaScript ones a deployment runs, not tsx-transpiled sources.
import { existsSync } from 'node:fs';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { MessageChannel, Worker } from 'node:worker_threads';
import { z } from 'zod';
import { createBus } from '../src/bus/index.js';
import { runEngage } from '../src/engage/index.js';
import type { SandboxPool } from '../src/sandbox/index.js';
import { createScriptedModel, type ScriptedStep } from '../src/testing.js';
import {
  createToolRegistry,
  defineTool,
  executeToolCall,
  type ToolContext,
  type ToolDefinition,
} from '../src/tools/index.js';
import { silentLogger } from '../src/util/index.js';
import { percentile } from './stats.js';

type SandboxModule = typeof import('../src/sandbox/index.js');
type Language = 'javascript' | 'python';

const distEntry = fileURLToPath(new URL('../dist/sandbox/index.js', import.meta.url));

/** Median and p90 of the samples, by the nearest rank below as every benchmark reports them (stats.ts). */
function stats(samples: number[]) {
  const sorted = [...samples].sort((left, right) => left - right);
  return { median: percentile(sorted, 50), p90: percentile(sorted, 90) };
}

const round = (value: number, digits = 3) => Number(value.toFixed(digits));

async function timeIt(repetitions: number, work: () => Promise<unknown>): Promise<number[]> {
  const samples: number[] = [];
  for (let index = 0; index < repetitions; index++) {
    const started = performance.now();
    await work();
    samples.push(performance.now() - started);
  }
  return samples;
}

/**
 * A bare worker thread that posts a message and waits for the host's answer on its event loop, with no
 * engine, no validation and no tool behind it: what every call cost before the sandbox's answers moved
 * off the worker's event loop.
 */
async function bareRoundTripMs(calls: number): Promise<number> {
  const worker = new Worker(
    `const { parentPort } = require('node:worker_threads');
     let left = 0; let started = 0;
     parentPort.on('message', (message) => {
       if (message.start) { left = message.start; started = performance.now(); }
       if (left-- > 0) parentPort.postMessage({ call: left });
       else parentPort.postMessage({ doneMs: performance.now() - started });
     });`,
    { eval: true },
  );
  try {
    return await new Promise<number>((resolve) => {
      worker.on('message', (message: { call?: number; doneMs?: number }) => {
        if (message.doneMs !== undefined) resolve(message.doneMs / calls);
        else worker.postMessage({ reply: message.call, ok: true, content: 'ok' });
      });
      worker.postMessage({ start: calls });
    });
  } finally {
    await worker.terminate();
  }
}

/**
 * The floor under a call from code as the bridge makes it now: the worker posts the call and sleeps in
 * Atomics.wait; the host posts the answer on a second port and bumps a shared counter; the worker wakes
 * and reads the answer synchronously. No engine, no validation, no tool.
 */
async function atomicsRoundTripMs(calls: number): Promise<number> {
  const signal = new SharedArrayBuffer(4);
  const counter = new Int32Array(signal);
  const replies = new MessageChannel();
  const worker = new Worker(
    `const { parentPort, receiveMessageOnPort, workerData } = require('node:worker_threads');
     const { port, signal } = workerData;
     const counter = new Int32Array(signal);
     parentPort.once('message', (calls) => {
       const started = performance.now();
       for (let call = 0; call < calls; call++) {
         parentPort.postMessage({ call });
         for (;;) {
           const seen = Atomics.load(counter, 0);
           if (receiveMessageOnPort(port)) break;
           Atomics.wait(counter, 0, seen);
         }
       }
       parentPort.postMessage({ doneMs: performance.now() - started });
     });`,
    { eval: true, workerData: { port: replies.port2, signal }, transferList: [replies.port2] },
  );
  try {
    return await new Promise<number>((resolve) => {
      worker.on('message', (message: { call?: number; doneMs?: number }) => {
        if (message.doneMs !== undefined) return resolve(message.doneMs / calls);
        replies.port1.postMessage({ reply: message.call, ok: true, content: 'ok' });
        Atomics.add(counter, 0, 1);
        Atomics.notify(counter, 0);
      });
      worker.postMessage(calls);
    });
  } finally {
    replies.port1.close();
    await worker.terminate();
  }
}

const noop = defineTool({
  name: 'noop',
  description: 'does nothing',
  input: z.object({ n: z.number().optional() }),
  async execute() {
    return 'ok';
  },
});

function toolContext(toolCallId: string): ToolContext {
  return {
    runId: 'bench',
    agentId: 'main',
    workItemId: 'wi-bench',
    toolCallId,
    workspaceDir: process.cwd(),
    signal: new AbortController().signal,
    bus: createBus(),
    logger: silentLogger,
  };
}

export default {
  name: 'sandbox',
  description:
    'execute_code: cold/warm start, trivial run, tool call from code vs direct, 100 calls in one program vs 100 model turns',
  async run() {
    if (!existsSync(distEntry)) throw new Error('dist/sandbox is missing: run `npm run build` first');
    const sandbox = (await import(distEntry)) as SandboxModule;
    const loadAtStart = loadavg()[0]!;
    const rows: Array<Record<string, string | number>> = [];
    const notes: string[] = [];
    const row = (measure: string, samples: number[], unit: 'ms' | 'µs', target = '') => {
      const scale = unit === 'µs' ? 1000 : 1;
      const { median, p90 } = stats(samples);
      rows.push({
        measure,
        n: samples.length,
        median: round(median * scale, unit === 'µs' ? 1 : 3),
        p90: round(p90 * scale, unit === 'µs' ? 1 : 3),
        unit,
        target,
      });
    };

    // --- cold start: a new pool per sample, so each pays for a worker and an engine -------------------
    for (const [language, repetitions] of [
      ['javascript', 5],
      ['python', 3],
    ] as const) {
      const samples: number[] = [];
      for (let index = 0; index < repetitions; index++) {
        const pool = sandbox.createSandboxPool({});
        try {
          const started = performance.now();
          await pool.warm(language);
          samples.push(performance.now() - started);
        } finally {
          await pool.close();
        }
      }
      row(`cold start, ${language} (worker + engine ready)`, samples, 'ms');
    }

    const registry = createToolRegistry([noop]);
    const { pool, withCode, runCode, poolRun } = harness(sandbox);
    // Another build's sandbox (e.g. the previous commit's, built into a scratch folder) measured in the same
    // run, interleaved sample by sample, so the per-call figures compare under the same machine load.
    const baselineEntry = process.env.SANDBOX_BENCH_BASELINE;
    const baseline = baselineEntry ? harness((await import(baselineEntry)) as SandboxModule) : undefined;

    try {
      const trivial = { javascript: 'return 1', python: '1' } as const;
      for (const language of ['javascript', 'python'] as const) {
        await pool.warm(language);
        for (let index = 0; index < 20; index++) await poolRun(language, trivial[language]);
        const engineMs: number[] = [];
        const warm = await timeIt(200, async () => {
          const result = await poolRun(language, trivial[language]);
          engineMs.push(result.cpuMs);
        });
        row(
          `warm execution, ${language} (pool round trip)`,
          warm,
          'ms',
          language === 'javascript' ? '≤ 1 ms' : '≤ 5 ms',
        );
        row(`  of which inside the worker, ${language}`, engineMs, 'ms');
        const endToEnd = await timeIt(200, async () => {
          const outcome = await runCode(language, trivial[language]);
          if (outcome.isError) throw new Error(outcome.content);
        });
        row(`trivial execute_code end to end, ${language} (tool pipeline)`, endToEnd, 'ms');
      }

      // --- one tool call: directly vs from code ------------------------------------------------------
      const direct = await timeIt(2000, () =>
        executeToolCall({ id: 'd', name: 'noop', arguments: {} }, { registry, context: toolContext('d') }),
      );
      row('tool call made directly (executeToolCall)', direct, 'µs');
      const directMedian = stats(direct).median;
      const calls = 500;
      const loops = {
        javascript: {
          with: `for (let i = 0; i < ${calls}; i++) await tools.noop({ n: i }); return 1;`,
          without: `for (let i = 0; i < ${calls}; i++) await Promise.resolve({ n: i }); return 1;`,
        },
        python: {
          with: `for i in range(${calls}):\n    await tools.noop(n=i)\n1`,
          // No yield to the event loop: the bridge no longer makes one per call, so subtracting a loop that
          // does would hide that much of each call's cost.
          without: `for i in range(${calls}):\n    payload = {'n': i}\n1`,
        },
      };
      const perCallOf = async (
        run: (language: Language, code: string) => Promise<unknown>,
        language: Language,
      ) => {
        const [withCalls] = await timeIt(1, () => run(language, loops[language].with));
        const [withoutCalls] = await timeIt(1, () => run(language, loops[language].without));
        return (withCalls! - withoutCalls!) / calls;
      };
      for (const language of ['javascript', 'python'] as const) {
        if (baseline) await baseline.pool.warm(language);
        const builds = [
          { label: '', harness: { runCode, poolRun }, perCall: [] as number[], bridgeOnly: [] as number[] },
          ...(baseline
            ? [
                {
                  label: ' [baseline build]',
                  harness: baseline,
                  perCall: [] as number[],
                  bridgeOnly: [] as number[],
                },
              ]
            : []),
        ];
        for (let index = 0; index < 21; index++) {
          for (const build of builds) {
            build.perCall.push(await perCallOf(build.harness.runCode, language));
            build.bridgeOnly.push(await perCallOf(build.harness.poolRun, language));
          }
        }
        for (const { label, perCall, bridgeOnly } of builds) {
          row(`tool call from code, ${language} (per call, loop of ${calls})${label}`, perCall, 'µs');
          const overhead = perCall.map((value) => value - directMedian);
          row(`  overhead over the direct call, ${language}${label}`, overhead, 'µs', '≤ 50 µs');
          row(`  of which the bridge alone (host answers at once), ${language}${label}`, bridgeOnly, 'µs');
        }
        if (baseline) {
          const ratio = (key: 'perCall' | 'bridgeOnly') =>
            round(stats(builds[1]![key]).median / stats(builds[0]![key]).median, 2);
          notes.push(
            `${language}: the baseline build's call from code took ${ratio('perCall')}× this build's, its bridge alone ${ratio('bridgeOnly')}× (medians of the same interleaved samples).`,
          );
        }
      }
      const floor: number[] = [];
      const eventLoopFloor: number[] = [];
      for (let index = 0; index < 7; index++) {
        floor.push(await atomicsRoundTripMs(calls));
        eventLoopFloor.push(await bareRoundTripMs(calls));
      }
      row('bare round trip, worker waits in Atomics.wait (the floor of a call from code)', floor, 'µs');
      row('bare round trip, worker waits on its event loop (the bridge before)', eventLoopFloor, 'µs');

      // --- 100 tool calls: one program vs 100 model turns ----------------------------------------------
      const turns = 100;
      let runs = 0;
      const engage = (steps: ScriptedStep[]) =>
        runEngage({
          model: createScriptedModel({ steps }),
          messages: [{ role: 'user', content: 'go' }],
          tools: { registry: withCode },
          workspaceDir: process.cwd(),
          workItemId: 'wi-bench',
          scope: { runId: `r${++runs}`, agentId: 'main' },
          bus: createBus(),
          limits: { maxTurns: turns + 5 },
          context: { ledgerNudgeInterval: 0 },
        });
      const viaTurns = () =>
        engage([
          ...Array.from({ length: turns }, (_, index) => ({
            toolCalls: [{ name: 'noop', arguments: { n: index } }],
          })),
          { text: 'done' },
        ]);
      const viaCode = (language: Language) =>
        engage([
          {
            toolCalls: [
              {
                name: 'execute_code',
                arguments: {
                  language,
                  code:
                    language === 'javascript'
                      ? `for (let i = 0; i < ${turns}; i++) await tools.noop({ n: i }); return ${turns};`
                      : `for i in range(${turns}):\n    await tools.noop(n=i)\n${turns}`,
                },
              },
            ],
          },
          { text: 'done' },
        ]);
      const samples = { turns: [] as number[], javascript: [] as number[], python: [] as number[] };
      for (let index = 0; index < 7; index++) {
        samples.turns.push(...(await timeIt(1, viaTurns)));
        samples.javascript.push(...(await timeIt(1, () => viaCode('javascript'))));
        samples.python.push(...(await timeIt(1, () => viaCode('python'))));
      }
      row(`${turns} tool calls as ${turns} model turns (instant scripted model)`, samples.turns, 'ms');
      row(`${turns} tool calls from one JavaScript program`, samples.javascript, 'ms');
      row(`${turns} tool calls from one Python program`, samples.python, 'ms');
      const ratio = stats(samples.turns).median / stats(samples.javascript).median;
      notes.push(
        `One JavaScript program making ${turns} calls took ${round(1 / ratio, 2)}× the time of ${turns} instant model turns; ` +
          'with a real model every turn also costs a network round trip and the whole context in tokens, which the program avoids.',
      );
    } finally {
      await pool.close();
      await baseline?.pool.close();
    }

    notes.push(
      'Cold start: a fresh pool per sample, timed until the worker reports its engine ready (Pyodide loads its wasm and stdlib from node_modules).',
      'Warm execution: pool.execute of `return 1` / `1` on a reused worker: a fresh QuickJS runtime+context per run (no state crosses runs), or a fresh globals dict on the warm Pyodide; includes both postMessage hops. "Inside the worker" is the engine time the worker reports.',
      'End to end: executeToolCall of execute_code (validation, policy/hook pipeline, bus events, JSON report).',
      'Tool call from code: (loop with N awaited tools.noop calls − the same loop without the call: awaiting a resolved promise in JavaScript, building the arguments dict in Python) / N; each call goes worker → host → executeToolCall (zod, policy, hooks) → back. Overhead = that minus a direct executeToolCall of the same tool. "The bridge alone" runs the same loops with a host that answers every call at once, without the tool pipeline.',
      "The floor: a bare worker thread posting a message and waiting for the answer, N times; no engine, no validation. As the bridge does it, the worker sleeps in Atomics.wait and reads the answer from a second port synchronously; the older way, the answer arrived as a message on the worker's event loop. A call from code cannot cost less than the first while programs run in their own thread, which is what lets a runaway program be killed without touching the server.",
      `Figures come from a shared machine with other jobs running (1-minute load average ${round(loadAtStart, 1)} at the start, ${round(loadavg()[0]!, 1)} at the end); medians and p90 of interleaved samples. Under load, thread wake-ups are cheap (the cores never idle) but every figure swings; compare builds only within one run.`,
    );
    return { rows, notes };
  },
};

/** A pool of one sandbox build, its `execute_code` tool, and the two ways the benchmark runs programs. */
function harness(sandbox: SandboxModule) {
  const pool: SandboxPool = sandbox.createSandboxPool({});
  const executeCode: ToolDefinition = sandbox.createExecuteCodeTool({
    pool,
    config: sandboxConfigFor(sandbox),
  });
  const withCode = createToolRegistry([noop, executeCode]);
  let sequence = 0;
  const contextFor = (id: string) => {
    const context = toolContext(id);
    context.callTool = (call) =>
      executeToolCall(call, { registry: withCode, context: { ...context, toolCallId: call.id } });
    return context;
  };
  /** Through the whole tool pipeline: execute_code, and every call from the program as a tool call. */
  const runCode = (language: Language, code: string) => {
    const id = `c${++sequence}`;
    return executeToolCall(
      { id, name: 'execute_code', arguments: { language, code } },
      { registry: withCode, context: contextFor(id) },
    );
  };
  /** The pool alone, with a host that answers every call from the program at once. */
  const poolRun = (language: Language, code: string) =>
    pool.execute({
      language,
      code,
      executionId: `p${++sequence}`,
      timeoutMs: 30_000,
      maxOutputBytes: 65_536,
      maxResultBytes: 65_536,
      onToolCall: async () => ({ ok: true, content: 'ok' }),
    });
  return { pool, withCode, runCode, poolRun };
}

function sandboxConfigFor(sandbox: SandboxModule) {
  return sandbox.sandboxConfigSchema.parse({ max_tool_calls: 10_000, timeout_ms: 30_000 });
}
