import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createBus } from '../../src/bus/index.js';
import { createStore } from '../../src/store/index.js';
import { createScriptedModel } from '../../src/testing.js';
import {
  createWorkflowMethodHandlers,
  type TelemetryEvent,
  telemetryEventTypes,
} from '../../src/workflow/index.js';
import {
  chainWorkflow,
  edge,
  fanOutWorkflow,
  node,
  tempDir,
  trackedEngines,
  workflowYaml,
  writeWorkflow,
} from './helpers.js';

const { make, close: closeEngine } = trackedEngines();

describe('telemetry, plugins, artifacts, metadata, metrics', () => {
  it('emits the reference event types and publishes them on the agentd bus', async () => {
    const bus = createBus();
    const seen: string[] = [];
    bus.subscribe({ types: ['workflow:*'] }, (event) => seen.push(event.type));
    const engine = await make(
      {
        'workflow.yaml': fanOutWorkflow({
          fan: node('fan', 'branch'),
          arms: [{ id: 'a' }, { id: 'b' }],
          join: node('join', 'merge'),
        }),
      },
      { publish: bus.publish.bind(bus) },
    );
    const events: TelemetryEvent[] = [];
    engine.subscribe((event) => events.push(event));
    const result = await engine.run('x');
    const types = new Set(events.map((event) => event.type));
    for (const type of [
      'task_started',
      'node_started',
      'node_completed',
      'routing_branch',
      'clone_created',
      'routing_merge',
      'task_completed',
    ]) {
      expect(types.has(type as TelemetryEvent['type'])).toBe(true);
    }
    expect(telemetryEventTypes).toHaveLength(18);
    expect(seen).toContain('workflow:node-completed');
    expect(seen).toContain('workflow:clone-created');
    expect(events.every((event) => event.eventId.startsWith(`${result.taskId}:`))).toBe(true);
  });

  it('plugins observe frozen copies; a throwing or mutating plugin cannot affect the run', async () => {
    const dir = writeWorkflow({
      'workflow.yaml': workflowYaml(...(Object.values(chainWorkflow(1)) as [never, never])),
      'plugins.yaml': {
        plugins: [
          { id: 'thrower', entrypoint: './plugins.mjs#thrower' },
          { id: 'mutator', entrypoint: './plugins.mjs#mutator' },
          { id: 'recorder', entrypoint: './plugins.mjs#recorder', config: { tag: 'rec' } },
        ],
      },
      'plugins.mjs': [
        'export const seen = [];',
        'export const thrower = { on_event() { throw new Error("plugin bug"); }, on_startup() { throw new Error("startup bug"); } };',
        'export const mutator = { on_event(event) { try { event.payload.status = "hacked"; } catch (error) { seen.push("frozen:" + (error instanceof TypeError)); } } };',
        'export const recorder = (config) => ({ on_event(event) { seen.push(config.tag + ":" + event.type); }, async on_shutdown() { seen.push("shutdown"); } });',
      ].join('\n'),
    });
    const { createWorkflowEngine, loadWorkflow } = await import('../../src/workflow/index.js');
    const engine = await createWorkflowEngine({ workflow: await loadWorkflow(dir) });
    const result = await engine.run('x');
    expect(result.status).toBe('success');
    const events: TelemetryEvent[] = (await engine.inspect(result.taskId))!.events;
    expect(
      events
        .filter((event) => event.type === 'node_completed')
        .every((event) => event.payload.status === 'success'),
    ).toBe(true);
    await engine.close();
    const plugins = (await import(join(dir, 'plugins.mjs'))) as { seen: string[] };
    expect(plugins.seen).toContain('rec:task_completed');
    expect(plugins.seen).toContain('frozen:true');
    expect(plugins.seen.at(-1)).toBe('shutdown');
  });

  it('records node_output and tool_result artifacts, a telemetry snapshot, manifest hashes and metrics', async () => {
    const engine = await make({
      'workflow.yaml': workflowYaml(
        [node('start', 'start'), node('work', 'linear', { tools: ['echo'] }), node('done', 'exit')],
        [edge('start', 'work'), edge('work', 'done')],
      ),
      'tools.yaml': { tools: [{ id: 'echo', entrypoint: 'builtin:identity' }] },
    });
    const result = await engine.run({ v: 1 });
    const artifacts = engine.artifacts({ taskId: result.taskId });
    expect(artifacts.map((artifact) => artifact.type)).toEqual([
      'node_output',
      'tool_result',
      'node_output',
      'node_output',
      'telemetry_snapshot',
    ]);
    expect(engine.artifacts({ nodeId: 'work', type: 'tool_result' })[0]!.payload).toEqual({ v: 1 });
    // Shared by every run's snapshot and written from JSON made once: it must not change, at any depth.
    const snapshotMetadata = artifacts.at(-1)!.metadata;
    expect(Object.isFrozen(snapshotMetadata)).toBe(true);
    expect(Object.isFrozen(snapshotMetadata.manifestHashes)).toBe(true);
    expect(result.metadata.manifestHashes).toHaveProperty(['tools.yaml']);
    expect(result.metadata.schemaVersion).toBe('1');
    const metrics = engine.metrics();
    expect(metrics.counters['node.executions{node=work,status=success}']).toBe(1);
    expect(metrics.timers['node.duration_ms{node=work}']!.count).toBe(1);
    expect(metrics.timers['tool.duration_ms{tool=echo}']!.count).toBe(1);
  });
});

describe('policy', () => {
  it('a node denied by policy fails with policy_denied', async () => {
    const { nodes, edges } = chainWorkflow(1);
    const engine = await make({
      'workflow.yaml': workflowYaml(nodes, edges),
      'policy.yaml': {
        policies: [
          {
            name: 'freeze',
            rules: [{ target: 'node', target_id: 'n1', action: 'deny', reason: 'maintenance' }],
          },
        ],
      },
    });
    const result = await engine.run('x');
    expect(result).toMatchObject({ status: 'failure', error: { code: 'POLICY_DENIED', nodeId: 'n1' } });
    const denied = (await engine.inspect(result.taskId))!.events.find(
      (event) => event.type === 'policy_denied',
    );
    expect(denied!.payload).toMatchObject({
      target: 'node',
      targetId: 'n1',
      policy: 'freeze',
      reason: 'maintenance',
    });
    // The engine keeps the decision: the next run is denied the same way, and says so again.
    const again = await engine.run('y');
    expect(again).toMatchObject({ status: 'failure', error: { code: 'POLICY_DENIED', nodeId: 'n1' } });
    const events = (await engine.inspect(again.taskId))!.events.filter(
      (event) => event.type === 'policy_denied',
    );
    expect(events.map((event) => event.payload)).toEqual([denied!.payload]);
  });

  it('a disabled policy denies nothing; a denied context profile fails the node', async () => {
    const { nodes, edges } = chainWorkflow(1);
    nodes[1] = { ...nodes[1]!, context: 'global' };
    const engine = await make({
      'workflow.yaml': workflowYaml(nodes, edges),
      'policy.yaml': {
        policies: [
          { name: 'off', enabled: false, rules: [{ target: 'node', target_id: 'n1', action: 'deny' }] },
          { name: 'no-global', rules: [{ target: 'context', target_id: 'global', action: 'deny' }] },
        ],
      },
    });
    const result = await engine.run('x');
    expect(result.error).toMatchObject({ code: 'POLICY_DENIED', nodeId: 'n1' });
    expect(result.error!.message).toMatch(/context profile "global"/);
  });
});

describe('scheduler', () => {
  function gatedEngine(schedulerConfig: Record<string, unknown>) {
    const gates: Array<() => void> = [];
    let active = 0;
    let peak = 0;
    const { nodes, edges } = chainWorkflow(1);
    const started: Array<() => void> = [];
    const enginePromise = make(
      { 'workflow.yaml': workflowYaml(nodes, edges), 'scheduler.yaml': { scheduler: schedulerConfig } },
      {
        functions: {
          n1: () =>
            new Promise<string>((resolve) => {
              active++;
              peak = Math.max(peak, active);
              gates.push(() => {
                active--;
                resolve('ok');
              });
              started.shift()?.();
            }),
        },
      },
    );
    const nextStart = () => new Promise<void>((resolve) => started.push(resolve));
    return { enginePromise, gates, nextStart, peak: () => peak };
  }

  it('is done with a run before its caller hears of it: a run started then starts at once', async () => {
    const { nodes, edges } = chainWorkflow(1);
    const engine = await make(
      { 'workflow.yaml': workflowYaml(nodes, edges) },
      {
        functions: {
          n1: (input) => {
            if (input === 'fail') throw new Error('no');
            return input;
          },
        },
      },
    );
    const states = () =>
      Object.fromEntries(engine.queueStatus().tasks.map((task) => [task.taskId, task.state]));
    const first = await engine.run('a');
    expect(engine.queueStatus()).toMatchObject({ queued: 0, running: 0 });
    const failed = await engine.run('fail');
    expect(failed.status).toBe('failure');
    expect(states()).toEqual({ [first.taskId]: 'completed', [failed.taskId]: 'failed' });
    const next = engine.enqueue('b');
    expect(states()[next.taskId]).toBe('running');
    expect((await next.result).output).toBe('b');
  });

  it('runs up to max_concurrency tasks at once, FIFO, and rejects beyond max_queue_size', async () => {
    const { enginePromise, gates, nextStart, peak } = gatedEngine({ max_concurrency: 2, max_queue_size: 1 });
    const engine = await enginePromise;
    const events: string[] = [];
    engine.subscribe((event) => {
      if (event.type === 'task_queued' || event.type === 'task_dequeued' || event.type === 'queue_full')
        events.push(`${event.type}:${event.taskId}`);
    });
    const firstTwo = Promise.all([nextStart(), nextStart()]);
    const a = engine.enqueue('a');
    const b = engine.enqueue('b');
    await firstTwo;
    const c = engine.enqueue('c');
    expect(engine.queueStatus()).toMatchObject({ queued: 1, running: 2 });
    expect(() => engine.enqueue('d')).toThrow(expect.objectContaining({ code: 'QUEUE_FULL' }));
    expect(events).toContain('queue_full:wft_4');
    expect(engine.queueStatus().tasks.map((task) => `${task.taskId}:${task.state}`)).toEqual([
      'wft_1:running',
      'wft_2:running',
      'wft_3:queued',
    ]);
    const third = nextStart();
    gates.shift()!();
    await third;
    expect(engine.queueStatus()).toMatchObject({ queued: 0, running: 2 });
    for (const open of gates.splice(0)) open();
    const results = await Promise.all([a.result, b.result, c.result]);
    expect(results.map((result) => result.status)).toEqual(['success', 'success', 'success']);
    expect(peak()).toBe(2);
    expect(events.filter((event) => event.startsWith('task_dequeued'))).toEqual([
      'task_dequeued:wft_1',
      'task_dequeued:wft_2',
      'task_dequeued:wft_3',
    ]);
  });

  it('a queued task can be cancelled before it starts', async () => {
    const { enginePromise, gates, nextStart } = gatedEngine({ max_concurrency: 1, max_queue_size: 5 });
    const engine = await enginePromise;
    const started = nextStart();
    const first = engine.enqueue('a');
    await started;
    const second = engine.enqueue('b');
    expect(engine.cancel(second.taskId)).toBe(true);
    expect(await second.result).toMatchObject({ status: 'failure', state: 'cancelled' });
    gates.shift()!();
    expect((await first.result).status).toBe('success');
  });
});

describe('credentials', () => {
  const secret = 'sk-planted-SECRET-0123456789abcdef';

  it('loads keys from env and file, hands them only to the resolver, and never leaks them', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'key.json'), JSON.stringify({ nested: { api_key: 'file-secret-value-987654' } }));
    let handed: string | undefined;
    const model = createScriptedModel({
      steps: [{ error: { code: 'PROVIDER_AUTH', message: `invalid key ${secret} rejected` } }],
    });
    const { nodes, edges } = chainWorkflow(1);
    nodes[1] = { ...nodes[1]!, kind: 'agent', agent_id: 'writer' };
    const store = await createStore({ stateDir: dir });
    const engine = await make(
      {
        'workflow.yaml': workflowYaml(nodes, edges),
        'agents.yaml': {
          agents: [{ id: 'writer', llm: 'anthropic/claude-x', credential_id: 'anthropic_main' }],
        },
        'provider_credentials.yaml': {
          provider_credentials: [
            {
              id: 'anthropic_main',
              provider: 'anthropic',
              auth: { type: 'api_key', source: 'env', env_var: 'TEST_ANTHROPIC_KEY' },
            },
            {
              id: 'from_file',
              provider: 'openai',
              auth: {
                type: 'api_key',
                source: 'file',
                file_path: join(dir, 'key.json'),
                file_key: 'nested.api_key',
              },
            },
            {
              id: 'missing',
              provider: 'openai',
              auth: { type: 'api_key', source: 'env', env_var: 'NOT_SET_ANYWHERE' },
            },
          ],
        },
      },
      {
        env: { TEST_ANTHROPIC_KEY: secret },
        database: store.db,
        resolveModel: (_name, { credential }) => {
          handed = credential?.apiKey;
          return model;
        },
      },
    );
    const events: TelemetryEvent[] = [];
    engine.subscribe((event) => events.push(event));
    const result = await engine.run(`please use ${secret}`);
    expect(handed).toBe(secret);
    expect(result.status).toBe('failure');
    const surfaces = JSON.stringify({
      result,
      events,
      inspect: await engine.inspect(result.taskId),
      artifacts: engine.artifacts({ rootTaskId: result.taskId }),
      credentials: engine.credentials(),
      adapters: engine.adapters(),
    });
    expect(surfaces).not.toContain(secret);
    expect(surfaces).not.toContain('file-secret-value-987654');
    expect(surfaces).toContain('[REDACTED]');
    await closeEngine(engine);
    await store.close();
    const stored = readdirSync(dir).filter((name) => name.startsWith('agentd.db'));
    expect(stored).toContain('agentd.db');
    for (const name of stored)
      expect(readFileSync(join(dir, name)).includes(Buffer.from(secret))).toBe(false);
    expect(engine.credentials().map((entry) => [entry.id, entry.available])).toEqual([
      ['anthropic_main', true],
      ['from_file', true],
      ['missing', false],
    ]);
  });
});

describe('evaluations', () => {
  it('runs suites with every assertion type and reports regressions against the baseline', async () => {
    const stateDir = tempDir();
    const { nodes, edges } = chainWorkflow(1);
    let broken = false;
    const files = {
      'workflow.yaml': workflowYaml(nodes, edges, { id: 'evals' }),
      'schemas/answer.json': {
        type: 'object',
        properties: { answer: { type: 'string' } },
        required: ['answer'],
      },
      'evaluations.yaml': {
        suites: [
          {
            name: 'basics',
            cases: [
              {
                id: 'shape',
                input: 'hello world',
                assertions: [
                  { type: 'status', expected: 'success' },
                  { type: 'equals', field_path: 'answer', expected: 'HELLO WORLD' },
                  { type: 'contains', field_path: 'answer', expected: 'WORLD' },
                  { type: 'schema_valid', expected: 'answer' },
                  { type: 'custom', function: 'short' },
                ],
              },
              { id: 'always', input: 'x', assertions: [{ type: 'status', expected: 'success' }] },
            ],
          },
        ],
      },
    };
    const options = {
      stateDir,
      functions: { n1: (input: unknown) => ({ answer: broken ? 'nope' : String(input).toUpperCase() }) },
      assertions: { short: ({ value }: { value: unknown }) => JSON.stringify(value).length < 100 },
    };
    const engine = await make(files, options);
    const first = await engine.runEvaluations();
    expect(first.totals).toEqual({ cases: 2, passed: 2, failed: 0 });
    expect(first.hadBaseline).toBe(false);
    broken = true;
    const second = await engine.runEvaluations();
    expect(second.totals).toEqual({ cases: 2, passed: 1, failed: 1 });
    expect(second.regressions).toEqual([{ suite: 'basics', caseId: 'shape' }]);
    const failed = second.suites[0]!.cases[0]!.assertions.filter((assertion) => !assertion.pass).map(
      (assertion) => assertion.type,
    );
    expect(failed).toEqual(['equals', 'contains']);
    broken = false;
    const third = await engine.runEvaluations();
    expect(third.fixed).toEqual([{ suite: 'basics', caseId: 'shape' }]);
    // A baseline that cannot be read (torn write, hand edit) counts as none and is written afresh.
    writeFileSync(third.baselinePath!, '{"cases": {"basics/shape": tr');
    const fourth = await engine.runEvaluations();
    expect(fourth.hadBaseline).toBe(false);
    expect((await engine.runEvaluations()).hadBaseline).toBe(true);
  });
});

describe('gateway method handlers', () => {
  it('run, status and cancel validate params and reach the engine', async () => {
    const { nodes, edges } = chainWorkflow(1);
    const engine = await make(
      { 'workflow.yaml': workflowYaml(nodes, edges) },
      { functions: { n1: (input) => `${input}!` } },
    );
    const handlers = createWorkflowMethodHandlers({ engineFor: async () => engine });
    const ran = await handlers.run({ dir: '/anywhere', input: 'hi' });
    expect(ran.result).toMatchObject({ status: 'success', output: 'hi!' });
    expect(await handlers.status({ taskId: ran.taskId })).toMatchObject({
      task: { status: 'success', stagesExecuted: 3 },
    });
    expect(await handlers.cancel({ taskId: ran.taskId })).toEqual({ taskId: ran.taskId, cancelled: false });
    await expect(handlers.run({ input: 'no dir' })).rejects.toMatchObject({ code: 'INVALID_REQUEST' });
    await expect(handlers.status({ taskId: 'nope' })).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });
});
