import { afterEach, describe, expect, it } from 'vitest';
import { createManualClock } from '../../src/util/index.js';
import { assembleContext } from '../../src/workflow/context.js';
import type {
  ContextProfile,
  MemoryStore,
  MemoryStoreKind,
  WorkflowEngine,
} from '../../src/workflow/index.js';
import { createInMemoryStore, createSqlMemoryStore } from '../../src/workflow/memory-store.js';
import { createSqlRecordStore } from '../../src/workflow/record-store.js';
import { describeEachDatabase } from '../helpers/databases.js';
import { chainWorkflow, edge, engineFor, node, tempDir, workflowYaml } from './helpers.js';

const engines: WorkflowEngine[] = [];
afterEach(async () => {
  await Promise.all(engines.splice(0).map((engine) => engine.close()));
});

let itemCounter = 0;
function item(
  text: string,
  options: { tags?: string[]; protected?: boolean; taskId?: string; at?: number } = {},
) {
  itemCounter++;
  return {
    id: `i${itemCounter}`,
    projectId: 'p',
    payload: text,
    tags: options.tags ?? [],
    protected: options.protected ?? false,
    metadata: {},
    createdAt: options.at ?? 1_000 + itemCounter,
    ...(options.taskId ? { taskId: options.taskId } : {}),
  };
}

function stores(): Record<MemoryStoreKind, MemoryStore> {
  return {
    task: createInMemoryStore({ kind: 'task' }),
    project: createInMemoryStore({ kind: 'project' }),
    global: createInMemoryStore({ kind: 'global' }),
  };
}

const profile = (overrides: Partial<ContextProfile> = {}): ContextProfile => ({
  id: 'p',
  max_tokens: 10,
  retrieval_policy: 'recency',
  sources: [{ store: 'project', tags: [] }],
  metadata: {},
  ...overrides,
});

describe('context assembly', () => {
  it('keeps the newest items that fit the token budget, returned oldest first', async () => {
    const all = stores();
    for (const text of ['aaaa aaaa', 'bbbb bbbb', 'cccc cccc', 'dddd dddd'])
      await all.project.add(item(text)); // 3 tokens each
    const context = await assembleContext({
      profile: profile({ max_tokens: 7 }),
      stores: all,
      taskId: 't',
      query: '',
    });
    expect(context.items.map((entry) => entry.text)).toEqual(['cccc cccc', 'dddd dddd']);
    expect(context.metadata).toMatchObject({
      budgetTokens: 7,
      usedTokens: 6,
      considered: 4,
      included: 2,
      dropped: 2,
      overBudget: false,
    });
  });

  it('always keeps protected items, even past the budget', async () => {
    const all = stores();
    await all.project.add(item('x'.repeat(40), { protected: true })); // 10 tokens
    await all.project.add(item('newest note'));
    const context = await assembleContext({
      profile: profile({ max_tokens: 8 }),
      stores: all,
      taskId: 't',
      query: '',
    });
    expect(context.items.map((entry) => entry.protected)).toEqual([true]);
    expect(context.metadata).toMatchObject({ protectedIncluded: 1, overBudget: true });
  });

  it('filters by source tags and reads only the current task from the task store', async () => {
    const all = stores();
    await all.task.add(item('mine', { taskId: 't1', tags: ['draft'] }));
    await all.task.add(item('other task', { taskId: 't2', tags: ['draft'] }));
    await all.project.add(item('tagged', { tags: ['doc'] }));
    await all.project.add(item('untagged'));
    const context = await assembleContext({
      profile: profile({
        max_tokens: 100,
        sources: [
          { store: 'task', tags: [] },
          { store: 'project', tags: ['doc'] },
        ],
      }),
      stores: all,
      taskId: 't1',
      query: '',
    });
    expect(context.items.map((entry) => entry.text).sort()).toEqual(['mine', 'tagged']);
  });

  it('semantic ranks by overlap with the query; hybrid mixes in recency', async () => {
    const all = stores();
    await all.project.add(item('tide pools hold crabs and anemones'));
    await all.project.add(item('the weather is nice today'));
    await all.project.add(item('lunch was pasta'));
    const semantic = await assembleContext({
      profile: profile({ max_tokens: 9, retrieval_policy: 'semantic' }),
      stores: all,
      taskId: 't',
      query: 'crabs in tide pools',
    });
    expect(semantic.items.map((entry) => entry.text)).toEqual(['tide pools hold crabs and anemones']);
    const recency = await assembleContext({
      profile: profile({ max_tokens: 9 }),
      stores: all,
      taskId: 't',
      query: 'crabs in tide pools',
    });
    expect(recency.items.map((entry) => entry.text)).toEqual(['lunch was pasta']);
  });

  it('an agent node receives its profile context within budget', async () => {
    const { nodes, edges } = chainWorkflow(1);
    nodes[1] = { ...nodes[1]!, kind: 'agent', agent_id: 'a', context: 'notes' };
    const { createScriptedModel } = await import('../../src/testing.js');
    const model = createScriptedModel({ steps: [{ text: 'done' }] });
    const engine = await engineFor(
      {
        'workflow.yaml': workflowYaml(nodes, edges),
        'agents.yaml': { agents: [{ id: 'a', llm: 'scripted/x' }] },
        'memory.yaml': {
          memory: {
            context_profiles: [
              { id: 'notes', max_tokens: 5, sources: [{ store: 'global', tags: ['fact'] }] },
            ],
          },
        },
      },
      { resolveModel: () => model },
    );
    engines.push(engine);
    await engine.memory.add('global', 'old fact one', { tags: ['fact'] });
    await engine.memory.add('global', 'never shown', { tags: ['noise'] });
    await engine.memory.add('global', 'new fact two', { tags: ['fact'] });
    const result = await engine.run('go');
    expect(result.status).toBe('success');
    const system = model.requests[0]!.messages[0]!.content;
    expect(system).toContain('new fact two');
    expect(system).not.toContain('old fact one');
    expect(system).not.toContain('never shown');
    const events = (await engine.inspect(result.taskId))!.events.filter(
      (event) => event.type === 'context_assembled',
    );
    expect(events[0]!.payload).toMatchObject({ profileId: 'notes', budgetTokens: 5, included: 1 });
  });
});

describe('memory stores: retention and restart', () => {
  it('in_memory enforces max_items, dropping the oldest', async () => {
    const store = createInMemoryStore({ kind: 'project', maxItems: 2 });
    for (const text of ['a', 'b', 'c']) await store.add(item(text));
    expect((await store.list()).map((entry) => entry.payload)).toEqual(['b', 'c']);
  });

  it('an engine with jsonl and sqlite stores remembers across restart, in the platform store it is given', async () => {
    const stateDir = tempDir();
    const files = {
      'workflow.yaml': workflowYaml([node('start', 'start'), node('done', 'exit')], [edge('start', 'done')], {
        id: 'restart',
      }),
      'memory.yaml': {
        memory: {
          project_store: { backend: 'jsonl', retention: { max_items: 2 } },
          global_store: { backend: 'sqlite', retention: { max_items: 2 } },
        },
      },
    };
    const dir = tempDir();
    const { writeWorkflow } = await import('./helpers.js');
    writeWorkflow(files, dir);
    const { createWorkflowEngine, loadWorkflow } = await import('../../src/workflow/index.js');
    const { createStore } = await import('../../src/store/index.js');
    const open = async () => {
      const store = await createStore({ stateDir });
      const engine = await createWorkflowEngine({
        workflow: await loadWorkflow(dir),
        database: store.db,
        clock: createManualClock(),
      });
      return { store, engine };
    };
    const first = await open();
    // `jsonl` is the old name of a persistent store: it reads as the platform store now.
    expect(first.engine.workflow.memory.stores.project.backend).toBe('sqlite');
    for (const text of ['p1', 'p2', 'p3']) await first.engine.memory.add('project', text);
    for (const text of ['g1', 'g2', 'g3']) await first.engine.memory.add('global', text);
    await first.engine.close();
    await first.store.close();
    const second = await open();
    try {
      expect((await second.engine.memory.list('project')).map((entry) => entry.payload)).toEqual([
        'p2',
        'p3',
      ]);
      expect((await second.engine.memory.list('global')).map((entry) => entry.payload)).toEqual(['g2', 'g3']);
      // Nothing of the engine's own lands beside the platform's database file.
      const { readdirSync } = await import('node:fs');
      expect(readdirSync(stateDir).filter((name) => !name.startsWith('agentd.db'))).toEqual([]);
    } finally {
      await second.engine.close();
      await second.store.close();
    }
  });
});

describeEachDatabase('workflow SQL stores', (getDb) => {
  it('sqlite memory backend: retention per store and scope, global shared across workflows', async () => {
    const db = getDb();
    const a = await createSqlMemoryStore({ kind: 'project', db, scope: 'wf-a', maxItems: 2 });
    const b = await createSqlMemoryStore({ kind: 'project', db, scope: 'wf-b', maxItems: 2 });
    for (const text of ['a1', 'a2', 'a3']) await a.add(item(text, { tags: ['t'] }));
    await b.add(item('b1'));
    expect((await a.list()).map((entry) => entry.payload)).toEqual(['a2', 'a3']);
    expect((await a.list())[0]!.tags).toEqual(['t']);
    expect(await b.count()).toBe(1);
    const globalA = await createSqlMemoryStore({ kind: 'global', db, scope: 'wf-a' });
    await globalA.add(item('shared'));
    const globalB = await createSqlMemoryStore({ kind: 'global', db, scope: 'wf-b' });
    expect((await globalB.list()).map((entry) => entry.payload)).toEqual(['shared']);
    const reopened = await createSqlMemoryStore({ kind: 'project', db, scope: 'wf-a', maxItems: 2 });
    await reopened.add(item('a4'));
    expect((await reopened.list()).map((entry) => entry.payload)).toEqual(['a3', 'a4']);
  });

  it('sql memory backend keeps an item written at a real time (milliseconds since 1970)', async () => {
    const store = await createSqlMemoryStore({ kind: 'project', db: getDb(), scope: 'wf-now' });
    const at = Date.UTC(2026, 11, 6, 12, 0, 0);
    await store.add(item('now', { at }));
    expect((await store.list()).map((entry) => entry.createdAt)).toEqual([at]);
  });

  it('durable engine: every stage record is persisted and a run can be inspected from another engine', async () => {
    const db = getDb();
    const { nodes, edges } = chainWorkflow(2);
    const files = { 'workflow.yaml': workflowYaml(nodes, edges, { id: 'durable' }) };
    const writer = await engineFor(files, {
      database: db,
      functions: { n1: (input) => `${input}1`, n2: (input) => `${input}2` },
    });
    const result = await writer.run('x');
    await writer.close();
    const records = createSqlRecordStore(db);
    const run = await records.loadRun(result.taskId);
    expect(run!.tasks[0]!.history.map((stage) => stage.nodeId)).toEqual(['start', 'n1', 'n2', 'exit']);
    expect(run!.tasks[0]!.state).toBe('completed');
    expect(run!.events.map((event) => event.type)).toContain('task_completed');
    expect(run!.artifacts.filter((artifact) => artifact.type === 'node_output')).toHaveLength(4);
    const reader = await engineFor(files, { database: db });
    engines.push(reader);
    const report = await reader.inspect(result.taskId);
    expect(report!.output).toBe('x12');
    expect(report!.summary.path).toEqual(['start', 'n1', 'n2', 'exit']);
    expect((await records.listRuns({ workflowId: 'durable' }))[0]!.taskId).toBe(result.taskId);
  });
});
