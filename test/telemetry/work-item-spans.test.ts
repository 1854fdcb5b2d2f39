import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createWorkerPool, type RunItem, type WorkerPool } from '../../src/agents/index.js';
import { type BusEvent, createBus } from '../../src/bus/index.js';
import { runEngage } from '../../src/engage/index.js';
import {
  createExecuteCodeTool,
  createSandboxPool,
  type SandboxPool,
  sandboxConfigSchema,
} from '../../src/sandbox/index.js';
import type { SqlDatabase } from '../../src/store/index.js';
import { createScriptedModel } from '../../src/testing.js';
import { createToolRegistry } from '../../src/tools/index.js';
import { createChildWorkTools, createWorkQueue, type WorkQueue } from '../../src/work/index.js';
import { noopTool, tempDir } from '../engage/helpers.js';
import { openTestDatabase } from '../helpers/databases.js';
import { namesOf, useTracing } from './otel-harness.js';

const tracing = useTracing();

let sandbox: SandboxPool | undefined;
let db: SqlDatabase | undefined;
let queue: WorkQueue | undefined;
let pool: WorkerPool | undefined;
afterEach(async () => {
  await pool?.stop();
  await queue?.close();
  await db?.close();
  pool = undefined;
  queue = undefined;
  db = undefined;
});
afterAll(async () => {
  await sandbox?.close();
});

const program = 'await tools.noop({ n: 1 }); return "ok";';

describe('the span tree of a work item run', () => {
  it('work item → run → turns → model and tool calls → code run → its tool call; the child is its own trace', async () => {
    db = await openTestDatabase('sqlite');
    const bus = createBus();
    queue = createWorkQueue({ db, bus, config: { backoffBaseMs: 0 } });
    sandbox ??= createSandboxPool({});
    const registry = createToolRegistry([
      noopTool,
      createExecuteCodeTool({ pool: sandbox, config: sandboxConfigSchema.parse({}) }),
      ...createChildWorkTools({ queue, bus }),
    ]);
    const model = createScriptedModel({
      modelId: 'scripted-1',
      steps: [
        {
          toolCalls: [
            { id: 'call_noop', name: 'noop', arguments: { n: 0 } },
            { id: 'call_code', name: 'execute_code', arguments: { language: 'javascript', code: program } },
            { id: 'call_spawn', name: 'spawn_child_work', arguments: { kind: 'child', description: 'sub' } },
          ],
          usage: { inputTokens: 12, outputTokens: 5 },
        },
        { text: 'done', usage: { inputTokens: 30, outputTokens: 2 } },
      ],
    });
    const workspaceDir = await tempDir();
    const runItem: RunItem = async (item, { signal }) => {
      // The child only has to end; its run is not the subject here.
      if (item.kind === 'child') return { summary: 'child done' };
      const result = await runEngage({
        model,
        messages: [{ role: 'user', content: item.description }],
        tools: { registry },
        workspaceDir,
        workItemId: item.id,
        scope: { runId: 'run_parent', agentId: 'main' },
        bus,
        signal,
        limits: { maxParallelTools: 1 },
      });
      return { summary: result.text };
    };
    const completed: string[] = [];
    const bothDone = new Promise<void>((resolve) => {
      bus.subscribe({ types: ['work:completed'] }, (event: BusEvent) => {
        completed.push((event.data as { kind: string }).kind);
        if (completed.length === 2) resolve();
      });
    });
    pool = createWorkerPool({ queue, bus, runItem, concurrency: 2 });
    pool.start();
    const parent = await queue.submit({ kind: 'task', agentId: 'main', description: 'do it' });
    await bothDone;
    await pool.idle();
    model.assertAllConsumed();

    const workItem = tracing.span('work_item task');
    expect(workItem.parentSpanContext).toBeUndefined();
    expect(workItem.attributes).toMatchObject({
      'agentd.work_item.id': parent.id,
      'agentd.work_item.kind': 'task',
      'agentd.worker.type': 'chat',
    });
    expect(namesOf(tracing.tree(workItem))).toEqual({
      'work_item task': [
        {
          'invoke_agent main': [
            {
              engage_turn: [
                'chat scripted-1',
                'execute_tool noop',
                { 'execute_tool execute_code': [{ 'code_run javascript': ['execute_tool noop'] }] },
                { 'execute_tool spawn_child_work': ['submit_work_item child'] },
              ],
            },
            { engage_turn: ['chat scripted-1'] },
          ],
        },
      ],
    });

    // Parent ids, checked directly rather than through the tree helper.
    const run = tracing.span('invoke_agent main');
    expect(run.parentSpanContext?.spanId).toBe(workItem.spanContext().spanId);
    expect(run.spanContext().traceId).toBe(workItem.spanContext().traceId);
    const [firstTurn, secondTurn] = tracing.childrenOf(run);
    expect(firstTurn!.attributes['agentd.turn']).toBe(1);
    expect(secondTurn!.attributes['agentd.turn']).toBe(2);
    const code = tracing.span('code_run javascript');
    const toolSpans = tracing.spans().filter((span) => span.name === 'execute_tool noop');
    const nested = toolSpans.find((span) => span.attributes['gen_ai.tool.call.id'] === 'call_code.1')!;
    expect(nested.parentSpanContext?.spanId).toBe(code.spanContext().spanId);
    const direct = toolSpans.find((span) => span.attributes['gen_ai.tool.call.id'] === 'call_noop')!;
    expect(direct.parentSpanContext?.spanId).toBe(firstTurn!.spanContext().spanId);

    expect(run.attributes).toMatchObject({
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.agent.name': 'main',
      'gen_ai.request.model': 'scripted-1',
      'gen_ai.usage.input_tokens': 42,
      'gen_ai.usage.output_tokens': 7,
      'agentd.run.status': 'completed',
      'agentd.work_item.id': parent.id,
    });
    expect(direct.attributes).toMatchObject({
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'noop',
      'gen_ai.tool.type': 'function',
    });

    // The child runs in a trace of its own, named by the span that submitted it.
    const submitted = tracing.span('submit_work_item child');
    const childRun = tracing.span('work_item child');
    expect(childRun.parentSpanContext).toBeUndefined();
    expect(childRun.spanContext().traceId).not.toBe(workItem.spanContext().traceId);
    expect(childRun.attributes['agentd.work_item.parent_id']).toBe(parent.id);
    expect(submitted.attributes['agentd.work_item.id']).toBe(childRun.attributes['agentd.work_item.id']);
  });
});
