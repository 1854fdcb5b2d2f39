import { cpSync, existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import { startRuntime, tempHome } from './helpers.js';

const example = join(import.meta.dirname, '..', '..', 'examples', 'mini-editor');

describe('workflows through the runtime', () => {
  it('runs the mini-editor example over the gateway with node events streamed', async () => {
    const started = await startRuntime();
    // The gateway runs workflows of its configured directories only (default <state dir>/workflow-library);
    // a copy there also keeps the files the example writes out of the repository.
    const dir = join(started.runtime.state.home, 'workflow-library', 'mini-editor');
    cpSync(example, dir, { recursive: true });
    const client = await started.connect();
    try {
      const events: string[] = [];
      client.onEvent((event) => {
        if (event.startsWith('workflow.')) events.push(event);
      });
      const result = await client.call<{
        taskId: string;
        result: { status: string; output: Record<string, unknown> };
      }>(
        'workflow.run',
        { dir, input: { request: 'Create a note about tide pools' } },
        { timeoutMs: 60_000 },
      );
      expect(result.result.status).toBe('success');
      expect(result.result.output).toMatchObject({ title: expect.any(String), sections: expect.any(Array) });
      expect(existsSync(join(dir, 'documents', 'tide-pools.md'))).toBe(true);
      expect(events).toEqual(
        expect.arrayContaining([
          'workflow.task-started',
          'workflow.node-completed',
          'workflow.task-completed',
        ]),
      );
      const status = await client.call<{ task: { status: string } }>('workflow.status', {
        taskId: result.taskId,
      });
      expect(status.task.status).toBe('success');
      // The run was a durable work item of the pool's workflow class.
      const items = await client.call<{
        items: Array<{ kind: string; state: string; params: { taskId: string } }>;
      }>('work.list', {});
      expect(items.items.filter((item) => item.kind === 'workflow.run')).toEqual([
        expect.objectContaining({
          state: 'completed',
          params: expect.objectContaining({ taskId: result.taskId }),
        }),
      ]);

      await expect(client.call('workflow.run', { dir: '/etc' })).rejects.toMatchObject({ code: 'FORBIDDEN' });
      await expect(client.call('workflow.run', { dir: 'examples/../../' })).rejects.toMatchObject({
        code: 'FORBIDDEN',
      });
      await expect(client.call('workflow.run', { dir: 'nope' })).rejects.toMatchObject({ code: 'NOT_FOUND' });
      await expect(client.call('workflow.run', { dir, bogus: 1 })).rejects.toMatchObject({
        code: 'INVALID_REQUEST',
      });
    } finally {
      await client.close();
      await started.runtime.close();
    }
  });

  it('agentd run and agentd eval work on the example with no key', async () => {
    const work = mkdtempSync(join(tmpdir(), 'agentd-wf-cli-'));
    cpSync(example, join(work, 'mini-editor'), { recursive: true });
    let out = '';
    let err = '';
    const io = { stdout: (text: string) => (out += text), stderr: (text: string) => (err += text) };
    const home = tempHome();
    // Tool roots are relative to the working directory, as for a user running agentd in their project.
    const previousCwd = process.cwd();
    process.chdir(work);
    try {
      const input = '{"request":"Create a note about tide pools"}';
      const runCode = await main(
        ['node', 'agentd', '--home', home, 'run', 'mini-editor', '--input', input, '--json'],
        io,
      );
      expect(runCode).toBe(0);
      expect(err).toContain('✓ return_summary');
      expect(JSON.parse(out)).toMatchObject({ status: 'success' });
      expect(existsSync(join(work, 'documents', 'tide-pools.md'))).toBe(true);
      out = '';
      const evalCode = await main(['node', 'agentd', '--home', home, 'eval', 'mini-editor'], io);
      expect(evalCode).toBe(0);
      expect(out).toMatch(/2\/2 passed/);
      const badCode = await main(['node', 'agentd', '--home', home, 'workflow', 'validate', 'nope'], io);
      expect(badCode).toBe(2);
    } finally {
      process.chdir(previousCwd);
    }
  });
});
