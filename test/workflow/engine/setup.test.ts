import { describe, expect, it } from 'vitest';
import { createMemoryStore } from '../../../src/store/index.js';
import { createManualClock, createSequentialIdGenerator } from '../../../src/util/index.js';
import { bindTools, contextProfiles } from '../../../src/workflow/engine/setup.js';
import { createWorkflowEngine, loadWorkflow } from '../../../src/workflow/index.js';
import { chainWorkflow, workflowYaml, writeWorkflow } from '../helpers.js';
import { setupFor } from './core-helper.js';

const withTool = (entrypoint: string) => {
  const { nodes, edges } = chainWorkflow(1);
  nodes[1]!.tools = ['t'];
  return {
    'workflow.yaml': workflowYaml(nodes, edges),
    'tools.yaml': { tools: [{ id: 't', entrypoint }] },
  };
};

describe('engine setup', () => {
  it('binds function: tools to the registered functions and reports the ones missing', async () => {
    const workflow = await loadWorkflow(writeWorkflow(withTool('function:shout')));
    const shout = (input: unknown) => String(input).toUpperCase();
    expect(bindTools({ workflow, functions: { shout } }).get('t')?.invoke).toBe(shout);
    expect(() => bindTools({ workflow })).toThrow(
      expect.objectContaining({
        code: 'INVALID_CONFIG',
        issues: [
          expect.objectContaining({ file: 'tools.yaml', path: 'tools[0].entrypoint', rule: 'tools-load' }),
        ],
      }),
    );
  });

  it('adds the implicit global profile over the global store', async () => {
    const { nodes, edges } = chainWorkflow(1);
    const workflow = await loadWorkflow(
      writeWorkflow({
        'workflow.yaml': workflowYaml(nodes, edges),
        'memory.yaml': { memory: { global_context_max_tokens: 77 } },
      }),
    );
    expect(contextProfiles({ workflow }).get('global')).toMatchObject({
      max_tokens: 77,
      retrieval_policy: 'recency',
      sources: [{ store: 'global', tags: [] }],
    });
  });

  it('refuses durable runs or a sqlite store without the platform database, and opens none itself', async () => {
    const { nodes, edges } = chainWorkflow(1);
    const files = { 'workflow.yaml': workflowYaml(nodes, edges) };
    await expect(setupFor(files, { durable: true })).rejects.toMatchObject({
      code: 'INVALID_CONFIG',
      message: expect.stringContaining('durable runs'),
    });
    await expect(
      setupFor({ ...files, 'memory.yaml': { memory: { project_store: { backend: 'jsonl' } } } }),
    ).rejects.toMatchObject({
      code: 'INVALID_CONFIG',
      message: expect.stringContaining('sqlite memory store'),
    });
    const store = await createMemoryStore();
    try {
      const given = await setupFor(files, { database: store.db });
      expect(given.core.durable).toBe(true);
      expect(given.records).toBeDefined();
      const memoryOnly = await setupFor(files, { database: store.db, durable: false });
      expect(memoryOnly.core.durable).toBe(false);
    } finally {
      await store.close();
    }
  });

  it('redacts only when the workflow has secrets', async () => {
    const { nodes, edges } = chainWorkflow(1);
    const plain = await setupFor({ 'workflow.yaml': workflowYaml(nodes, edges) });
    expect(plain.core.redact).toBeUndefined();
    const secret = 'sk-setup-test-0123456789';
    const withSecret = await setupFor(
      {
        'workflow.yaml': workflowYaml(nodes, edges),
        'provider_credentials.yaml': {
          provider_credentials: [
            {
              id: 'k',
              provider: 'openai',
              auth: { type: 'api_key', source: 'env', env_var: 'SETUP_TEST_KEY' },
            },
          ],
        },
      },
      { env: { SETUP_TEST_KEY: secret } },
    );
    expect(withSecret.core.redact?.({ note: `key ${secret}` })).toEqual({ note: 'key [REDACTED]' });
    expect(withSecret.core.redactText(secret)).toBe('[REDACTED]');
  });

  it('hands run ids the time a run was accepted at only when the clock and the ids are the defaults', async () => {
    const { nodes, edges } = chainWorkflow(1);
    const workflow = await loadWorkflow(writeWorkflow({ 'workflow.yaml': workflowYaml(nodes, edges) }));
    expect((await setupFor({ 'workflow.yaml': workflowYaml(nodes, edges) })).runIds).toBeUndefined();
    const engine = await createWorkflowEngine({ workflow });
    const result = await engine.run('x');
    // The id's time is the task's creation time: one reading for both.
    expect(result.taskId.startsWith(`wft_${result.startedAt.toString(36)}`)).toBe(true);
    await engine.close();
    const clock = createManualClock();
    const ticking = await createWorkflowEngine({ workflow, clock });
    // An injected clock is the tasks' time, not the ids': those keep reading the wall clock.
    expect((await ticking.run('x')).taskId.startsWith(`wft_${clock.now().toString(36)}`)).toBe(false);
    await ticking.close();
    const sequential = await createWorkflowEngine({ workflow, idGenerator: createSequentialIdGenerator() });
    expect((await sequential.run('x')).taskId).toBe('wft_1');
    await sequential.close();
  });
});
