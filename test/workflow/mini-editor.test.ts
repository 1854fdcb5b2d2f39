import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { offlineDocumentNote, resolveModel } from '../../src/model/index.js';
import { createStore } from '../../src/store/index.js';
import { createWorkflowEngine, loadWorkflow, type WorkflowEngine } from '../../src/workflow/index.js';
import { tempDir } from './helpers.js';

const exampleDir = resolve(import.meta.dirname, '../../examples/mini-editor');
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** The example over a platform store in `stateDir`, as the CLI runs it. */
async function miniEditor(workDir: string, stateDir: string): Promise<WorkflowEngine> {
  const workflow = await loadWorkflow(exampleDir);
  const store = await createStore({ stateDir });
  cleanups.push(() => store.close());
  const engine = await createWorkflowEngine({
    workflow,
    resolveModel: (name) => resolveModel(name, { env: {} }),
    workDir,
    database: store.db,
    stateDir,
    env: {},
  });
  cleanups.push(() => engine.close());
  return engine;
}

describe('examples/mini-editor with the offline local model', () => {
  it('creates a Markdown file, edits it, and returns the structured summary', async () => {
    const workDir = tempDir();
    const engine = await miniEditor(workDir, join(workDir, '.state'));
    const created = await engine.run({
      request: 'Create a note about tide pools: what lives there, and how to visit safely',
    });
    expect(created.status, JSON.stringify(created.error)).toBe('success');
    expect(created.output).toMatchObject({
      title: 'Tide Pools',
      path: 'tide-pools.md',
      sections: ['What Lives There', 'How to Visit Safely'],
      tone: 'neutral',
    });
    const file = join(workDir, 'documents', 'tide-pools.md');
    expect(readFileSync(file, 'utf8')).toMatch(/^# Tide Pools\n/);
    // The file says plainly that the offline model wrote it and how to get a real one.
    const written = readFileSync(file, 'utf8');
    expect(written).toContain(offlineDocumentNote);
    expect(written.split('\n')[2]).toBe(offlineDocumentNote);
    const path = (await engine.inspect(created.taskId))!.summary.path;
    expect(path).toEqual([
      'start',
      'normalize_request',
      'decide_operation',
      'draft_document',
      'collect_document',
      'save_document',
      'generate_summary',
      'return_summary',
    ]);

    const edited = await engine.run({ request: 'Edit tide-pools.md: add a section on etiquette' });
    expect(edited.status).toBe('success');
    expect((await engine.inspect(edited.taskId))!.summary.path).toContain('edit_document');
    expect(readFileSync(file, 'utf8')).toMatch(/## What Lives There[\s\S]*## Etiquette/);
    expect(readFileSync(file, 'utf8').split(offlineDocumentNote)).toHaveLength(2);
    expect((edited.output as { sections: string[] }).sections).toEqual([
      'What Lives There',
      'How to Visit Safely',
      'Etiquette',
    ]);
    // The project memory (a persistent store) and the runs are in the platform store it was given.
    expect(await engine.memory.list('project')).not.toEqual([]);
    expect(existsSync(join(workDir, '.state', 'agentd.db'))).toBe(true);
    expect(existsSync(join(workDir, '.state', 'memory'))).toBe(false);
  });

  it('its evaluation suite passes', async () => {
    const workDir = tempDir();
    const engine = await miniEditor(workDir, join(workDir, '.state'));
    const report = await engine.runEvaluations();
    expect(report.totals, JSON.stringify(report.suites, null, 2)).toEqual({ cases: 2, passed: 2, failed: 0 });
    expect(report.regressions).toEqual([]);
  });
});
