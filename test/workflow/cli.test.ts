import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { PassThrough } from 'node:stream';
import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { registerWorkflowCommands } from '../../src/cli/commands/workflow.js';
import { resolveModel } from '../../src/model/index.js';
import { createSqliteDatabase, migrate } from '../../src/store/index.js';
import { insertRows, type StoredRow } from '../helpers/workflow-rows.js';
import { edge, node, tempDir, workflowYaml, writeWorkflow } from './helpers.js';

const exampleDir = resolve(import.meta.dirname, '../../examples/mini-editor');

function cli(options: { stdin?: NodeJS.ReadableStream; cwd?: string; stateDir?: string } = {}) {
  const out: string[] = [];
  const err: string[] = [];
  let exitCode = 0;
  const stateDir = options.stateDir ?? tempDir();
  const cwd = options.cwd ?? tempDir();
  const program = new Command()
    .exitOverride()
    .configureOutput({ writeOut: (text) => out.push(text), writeErr: (text) => err.push(text) });
  registerWorkflowCommands(program, {
    resolveModel: (name) => resolveModel(name ?? 'local/agentd-local', { env: {} }),
    storeLocation: async () => ({ stateDir }),
    cwd,
    env: {},
    stdout: (text) => out.push(text),
    stderr: (text) => err.push(text),
    setExitCode: (code) => {
      exitCode = code;
    },
    ...(options.stdin ? { stdin: options.stdin } : {}),
  });
  return {
    run: (...args: string[]) => program.parseAsync(['node', 'agentd', ...args]),
    out: () => out.join(''),
    err: () => err.join(''),
    exitCode: () => exitCode,
    stateDir,
    cwd,
  };
}

describe('agentd workflow CLI', () => {
  it('validate reports a valid workflow, and every issue of an invalid one with file and path', async () => {
    const ok = cli();
    await ok.run('workflow', 'validate', exampleDir);
    expect(ok.out()).toMatch(/mini-editor: valid \(9 nodes, 9 edges, start "start"\)/);
    const broken = writeWorkflow({
      'workflow.yaml': workflowYaml([node('start', 'start'), node('x', 'linear')], [edge('start', 'x')]),
    });
    const bad = cli();
    await bad.run('workflow', 'validate', broken, '--json');
    const parsed = JSON.parse(bad.out()) as {
      valid: boolean;
      issues: Array<{ file: string; path: string; rule: string }>;
    };
    expect(parsed.valid).toBe(false);
    expect(parsed.issues.map((issue) => issue.rule)).toContain('has-exit');
    expect(bad.exitCode()).toBe(2);
  });

  it('inspect also reads runs from the per-workflow databases earlier versions kept', async () => {
    const session = cli();
    const legacyDir = join(session.stateDir, 'workflows', 'fixture-flow');
    mkdirSync(legacyDir, { recursive: true });
    // Such a file was created and migrated by the engine itself; rebuild one from the record corpus.
    const db = createSqliteDatabase({ path: join(legacyDir, 'workflow.db') });
    await migrate(db);
    const rows = JSON.parse(
      readFileSync(resolve(import.meta.dirname, '../fixtures/workflow-records/v0-rows.json'), 'utf8'),
    ) as Record<string, StoredRow[]>;
    await insertRows(db, rows);
    await db.close();
    await session.run('inspect', 'wft_fixture_branch');
    expect(session.err()).toBe('');
    expect(session.out()).toMatch(/task wft_fixture_branch \(fixture-flow\): partial/);
    expect(session.out()).toMatch(/path: start → pick → fan → join → done/);
  });

  it('run executes the mini-editor with the local model, shows progress, and inspect reads it back', async () => {
    const session = cli();
    await session.run(
      'run',
      exampleDir,
      '--input',
      JSON.stringify({ request: 'Create a page about bread baking: flour, and timing' }),
      '--json',
    );
    const result = JSON.parse(session.out()) as {
      status: string;
      taskId: string;
      output: { title: string; sections: string[] };
    };
    expect(result.status).toBe('success');
    expect(result.output).toMatchObject({ title: 'Bread Baking', sections: ['Flour', 'Timing'] });
    expect(session.err()).toMatch(/▸ draft_document \(linear\)/);
    expect(session.err()).toMatch(/✓ save_document \d+ ms/);
    expect(existsSync(join(session.cwd, 'documents', 'bread-baking.md'))).toBe(true);
    // Offline, the run says so (on stderr, so --json stays parseable) and so does the file it wrote.
    expect(session.err()).toContain('[local model] The agents of this run used the offline model.');
    expect(session.err()).toContain('AGENTD_MODEL');
    expect(readFileSync(join(session.cwd, 'documents', 'bread-baking.md'), 'utf8')).toContain(
      'not a real language model',
    );

    const inspector = cli({ stateDir: session.stateDir });
    await inspector.run('inspect', result.taskId);
    expect(inspector.out()).toMatch(/path: start → normalize_request → decide_operation → draft_document/);
    const missing = cli({ stateDir: session.stateDir });
    await missing.run('inspect', 'wft_nope');
    expect(missing.err()).toMatch(/no workflow task wft_nope/);
    expect(missing.exitCode()).toBe(2);
  });

  it('eval runs the example suite and passes', async () => {
    const session = cli();
    await session.run('eval', exampleDir);
    expect(session.out()).toMatch(/total: 2\/2 passed/);
    expect(session.exitCode()).toBe(0);
  });

  it('the REPL creates, edits with /edit-last, retries, queues, shows history and persists it', async () => {
    const input = new PassThrough();
    const session = cli({ stdin: input });
    const finished = session.run('repl', exampleDir);
    for (const line of [
      '/help',
      'Create a note about tide pools: what lives there',
      '/history',
      '/attach tide-pools.md',
      '/edit-last Edit tide-pools.md: add a section on etiquette',
      '/retry',
      '/detach',
      '/queue Create a note about owls: habitat',
      '/queue Create a note about bats: diet',
      '/queue-status',
      '/run-queue',
      '/show',
      '/status',
      '/inspect',
      '/nonsense',
      '/quit',
    ]) {
      input.write(`${line}\n`);
    }
    input.end();
    await finished;
    const out = session.out();
    expect(out).toContain('/edit-last <text>');
    expect(out).toMatch(/\[success\] task wft_\w+/);
    expect(out).toMatch(/1\. \[success\] Create a note about tide pools/);
    expect(out).toMatch(/attached tide-pools\.md/);
    expect(out).toMatch(/"Etiquette"/);
    expect(out).toMatch(/queued wft_\w+ \(1 waiting\)/);
    expect(out).toMatch(/queued 2, running 0, max_concurrency 2, max_queue_size 20, held/);
    expect(out).toMatch(/last saved: bats\.md/);
    expect(out).toMatch(/path start → normalize_request/);
    expect(out).toMatch(/unknown command \/nonsense/);
    expect(out).toMatch(/· node_completed generate_summary/);
    const doc = readFileSync(join(session.cwd, 'documents', 'tide-pools.md'), 'utf8');
    // The edit and its retry each added the section.
    expect(doc.match(/## Etiquette/g)).toHaveLength(2);
    const historyFile = join(session.stateDir, 'workflows', 'mini-editor', 'mini_editor_history.jsonl');
    const history = readFileSync(historyFile, 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { request: string; files: string[] });
    expect(history.map((entry) => entry.request)).toEqual([
      'Create a note about tide pools: what lives there',
      'Edit tide-pools.md: add a section on etiquette',
      'Edit tide-pools.md: add a section on etiquette',
      'Create a note about owls: habitat',
      'Create a note about bats: diet',
    ]);
    expect(history[1]!.files).toEqual(['tide-pools.md']);
    expect(history[3]!.files).toEqual([]);

    // A new session loads the persisted history.
    const again = new PassThrough();
    const second = cli({ stdin: again, stateDir: session.stateDir, cwd: session.cwd });
    const done = second.run('repl', exampleDir);
    again.end('/history 2\n');
    await done;
    expect(second.out()).toMatch(/5\. \[success\] Create a note about bats: diet/);
  });
});
