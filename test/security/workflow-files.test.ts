import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createWorkflowEngine, loadWorkflow, type WorkflowEngine } from '../../src/workflow/index.js';
import { chainWorkflow, workflowYaml, writeWorkflow } from '../workflow/helpers.js';

// Attacks on the file access of workflow tools: every path a tool is given goes through the platform's
// real-path confinement, so neither `..`, absolute paths nor symbolic links reach past the tool's root.

const engines: WorkflowEngine[] = [];
afterEach(async () => {
  await Promise.all(engines.splice(0).map((engine) => engine.close()));
});

/** A workflow whose one node calls `tool` (read_file or write_file) with the run's input, rooted at `files/`. */
async function fileWorkflow(tool: 'read_file' | 'write_file') {
  const { nodes, edges } = chainWorkflow(1);
  nodes[1]!.tools = ['files'];
  const dir = writeWorkflow({
    'workflow.yaml': workflowYaml(nodes, edges),
    'tools.yaml': {
      tools: [{ id: 'files', entrypoint: `builtin:${tool}`, permissions: { root: 'files' } }],
    },
  });
  mkdirSync(join(dir, 'files'));
  const engine = await createWorkflowEngine({ workflow: await loadWorkflow(dir), workDir: dir });
  engines.push(engine);
  const outside = mkdtempSync(join(tmpdir(), 'agentd-sec-wf-outside-'));
  writeFileSync(join(outside, 'secret.txt'), 'the secret');
  return { dir, root: join(dir, 'files'), outside, engine };
}

function expectMisuse(result: Awaited<ReturnType<WorkflowEngine['run']>>) {
  expect(result.status).toBe('failure');
  expect(result.error).toMatchObject({ code: 'TOOL_MISUSE', nodeId: 'n1' });
  expect(JSON.stringify(result.output)).not.toContain('the secret');
}

describe('workflow tool file confinement', () => {
  it('reads and writes inside the root', async () => {
    const { root, engine } = await fileWorkflow('write_file');
    const result = await engine.run({ path: 'notes/a.md', content: 'hello' });
    expect(result.status).toBe('success');
    expect(result.output).toEqual({ path: 'notes/a.md', bytes: 5 });
    expect(readFileSync(join(root, 'notes', 'a.md'), 'utf8')).toBe('hello');
  });

  it('refuses a symbolic link inside the root that points outside it', async () => {
    const { root, outside, engine } = await fileWorkflow('read_file');
    symlinkSync(join(outside, 'secret.txt'), join(root, 'innocent.txt'));
    symlinkSync(outside, join(root, 'shared'));
    expectMisuse(await engine.run({ path: 'innocent.txt' }));
    expectMisuse(await engine.run({ path: 'shared/secret.txt' }));
  });

  it('refuses to write through a linked directory or a dangling link', async () => {
    const { root, outside, engine } = await fileWorkflow('write_file');
    symlinkSync(outside, join(root, 'out'));
    symlinkSync(join(outside, 'planted.txt'), join(root, 'dangling.txt'));
    expectMisuse(await engine.run({ path: 'out/planted.txt', content: 'x' }));
    expectMisuse(await engine.run({ path: 'dangling.txt', content: 'x' }));
    expect(existsSync(join(outside, 'planted.txt'))).toBe(false);
  });

  it('refuses `..` and absolute paths elsewhere, reporting the platform reason', async () => {
    const { outside, engine } = await fileWorkflow('read_file');
    for (const path of ['../workflow.yaml', join(outside, 'secret.txt'), 'a/../../x']) {
      const result = await engine.run({ path });
      expectMisuse(result);
      const inspected = await engine.inspect(result.taskId);
      expect(inspected?.history[1]?.toolCalls[0]?.error?.message).toContain('outside');
    }
  });

  it('does not block on a FIFO in the root: the read is refused and the run ends', async () => {
    // An agent node with bash can make one; reading it would wait for a writer forever.
    const { root, engine } = await fileWorkflow('read_file');
    execFileSync('mkfifo', [join(root, 'pipe.md')]);
    const result = await engine.run({ path: 'pipe.md' });
    // A tool error other than misuse is recorded and leaves the run partial, not failed.
    expect(result.status).toBe('partial');
  });

  it('refuses a tool root that is itself a link out of the workflow directory', async () => {
    const { dir, outside } = await fileWorkflow('read_file');
    const { nodes, edges } = chainWorkflow(1);
    nodes[1]!.tools = ['files'];
    const linked = writeWorkflow(
      {
        'workflow.yaml': workflowYaml(nodes, edges),
        'tools.yaml': {
          tools: [{ id: 'files', entrypoint: 'builtin:read_file', permissions: { root: 'escape' } }],
        },
      },
      mkdtempSync(join(dir, 'nested-')),
    );
    symlinkSync(outside, join(linked, 'escape'));
    const engine = await createWorkflowEngine({ workflow: await loadWorkflow(linked), workDir: linked });
    engines.push(engine);
    expectMisuse(await engine.run({ path: 'secret.txt' }));
  });
});
