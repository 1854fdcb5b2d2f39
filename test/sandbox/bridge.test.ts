// The tool bridge between a program and the host: answers reach a worker that sleeps in Atomics.wait, so
// these tests check what that must not cost — concurrent calls, a kill at the time limit while the worker
// waits, answers of any size, and programs that can never finish.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createSandboxPool,
  type SandboxExecutionRequest,
  type SandboxPool,
} from '../../src/sandbox/index.js';

let pool: SandboxPool;
let sequence = 0;

beforeAll(async () => {
  // Generous start timeout: Pyodide's cold start on a loaded machine takes far longer than its ~1.3 s.
  pool = createSandboxPool({ startTimeoutMs: 170_000 });
  await Promise.all([pool.warm('javascript'), pool.warm('python')]);
}, 180_000);

afterAll(async () => {
  await pool?.close();
});

function execute(
  language: SandboxExecutionRequest['language'],
  code: string,
  onToolCall: SandboxExecutionRequest['onToolCall'],
  timeoutMs = 30_000,
) {
  return pool.execute({
    language,
    code,
    executionId: `bridge-${++sequence}`,
    timeoutMs,
    maxOutputBytes: 4096,
    maxResultBytes: 4 * 2 ** 20,
    onToolCall,
  });
}

/**
 * Answers nothing until `expected` calls are waiting at once: a bridge that sent one call and blocked for
 * its answer before sending the next would never get there, and the run would end at its time limit.
 */
function gate(expected: number) {
  const waiting: Array<() => void> = [];
  const names: string[] = [];
  let maxInFlight = 0;
  let inFlight = 0;
  const onToolCall = async (name: string, argsJson: string) => {
    names.push(name);
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    await new Promise<void>((resolve) => {
      waiting.push(resolve);
      if (waiting.length === expected) for (const release of waiting.splice(0)) release();
    });
    inFlight--;
    return { ok: true, content: `${name}:${JSON.stringify(JSON.parse(argsJson))}` };
  };
  return { onToolCall, names, maxInFlight: () => maxInFlight };
}

describe.each(['javascript', 'python'] as const)('the %s tool bridge', (language) => {
  it('keeps calls awaited together concurrent on the host', async () => {
    const { onToolCall, maxInFlight } = gate(3);
    const code =
      language === 'javascript'
        ? 'return await Promise.all([tools.a({ i: 1 }), tools.b({ i: 2 }), tools.c({ i: 3 })]);'
        : 'import asyncio\nawait asyncio.gather(tools.a(i=1), tools.b(i=2), tools.c(i=3))';
    const result = await execute(language, code, onToolCall, 20_000);
    expect(result.error).toBeUndefined();
    expect(JSON.parse(result.resultJson!)).toEqual(['a:{"i":1}', 'b:{"i":2}', 'c:{"i":3}']);
    expect(maxInFlight()).toBe(3);
  });

  it('runs awaited calls one after another, each with its own answer', async () => {
    const code =
      language === 'javascript'
        ? 'const out = []; for (let i = 0; i < 50; i++) out.push(await tools.echo({ i })); return out;'
        : 'out = []\nfor i in range(50):\n    out.append(await tools.echo(i=i))\nout';
    const result = await execute(language, code, async (_name, argsJson) => ({
      ok: true,
      content: String(JSON.parse(argsJson).i * 2),
    }));
    expect(JSON.parse(result.resultJson!)).toEqual(Array.from({ length: 50 }, (_, i) => String(i * 2)));
  });

  it('carries a failed call as ToolError and an answer of several megabytes intact', async () => {
    const big = 'x'.repeat(3 * 2 ** 20);
    const code =
      language === 'javascript'
        ? `let failed; try { await tools.bad({}); } catch (e) { failed = e.name + ': ' + e.message; }
           return [failed, (await tools.big({})).length];`
        : `try:
    await tools.bad()
    failed = None
except ToolError as error:
    failed = 'ToolError: ' + str(error)
[failed, len(await tools.big())]`;
    const result = await execute(language, code, async (name) =>
      name === 'bad' ? { ok: false, content: 'refused by the host' } : { ok: true, content: big },
    );
    expect(JSON.parse(result.resultJson!)).toEqual(['ToolError: refused by the host', big.length]);
  });

  it('gives each run only its own answers when an earlier run left a call unawaited', async () => {
    // The answer to the unawaited call comes later; the next run must not take it for its own.
    const first = await execute(
      language,
      language === 'javascript'
        ? 'tools.slow({}); return "left"'
        : 'import asyncio\nasyncio.ensure_future(tools.slow())\n"left"',
      () => new Promise((resolve) => setTimeout(() => resolve({ ok: true, content: 'late answer' }), 20)),
    );
    expect(JSON.parse(first.resultJson!)).toBe('left');
    const second = await execute(
      language,
      language === 'javascript'
        ? 'const out = []; for (let i = 0; i < 5; i++) out.push(await tools.fast({ i })); return out;'
        : 'out = []\nfor i in range(5):\n    out.append(await tools.fast(i=i))\nout',
      async (_name, argsJson) => {
        await new Promise((resolve) => setTimeout(resolve, 10));
        return { ok: true, content: `own ${JSON.parse(argsJson).i}` };
      },
    );
    expect(JSON.parse(second.resultJson!)).toEqual(['own 0', 'own 1', 'own 2', 'own 3', 'own 4']);
  });

  it('stops a program waiting for a tool that never answers at its time limit, and replaces the worker', async () => {
    const replacedBefore = pool.stats().replaced;
    const result = await execute(
      language,
      language === 'javascript' ? 'return await tools.hang({})' : 'await tools.hang()',
      () => new Promise(() => {}),
      400,
    );
    expect(result.error?.kind).toBe('timeout');
    expect(pool.stats().replaced).toBe(replacedBefore + 1);
    const next = await execute(
      language,
      language === 'javascript' ? 'return await tools.echo({})' : 'await tools.echo()',
      async () => ({ ok: true, content: 'answered' }),
      170_000,
    );
    expect(JSON.parse(next.resultJson!)).toBe('answered');
  }, 180_000);
});

describe('the JavaScript bridge', () => {
  it('answers a call whose host handler throws at once, so the waiting program goes on', async () => {
    const result = await execute(
      'javascript',
      'try { await tools.broken({}); return "ran"; } catch (e) { return e.name + ": " + e.message; }',
      () => {
        throw new Error('handler failed');
      },
    );
    expect(JSON.parse(result.resultJson!)).toBe('ToolError: handler failed');
  });

  it('ends a program that awaits what nothing can settle at once, instead of at its time limit', async () => {
    const replacedBefore = pool.stats().replaced;
    const result = await execute('javascript', 'await new Promise(() => {}); return 1;', async () => ({
      ok: true,
      content: '',
    }));
    expect(result.error).toEqual({
      kind: 'exception',
      message: 'Error: the program awaits a promise that nothing can settle',
    });
    expect(result.wallMs).toBeLessThan(5_000);
    expect(pool.stats().replaced).toBe(replacedBefore);
  });
});
