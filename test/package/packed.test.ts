import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectGateway } from '../../src/cli/gateway-client.js';
import { type FakeOpenAIServer, startFakeOpenAIServer } from '../helpers/fake-openai-server.js';

/**
 * The published shape: `npm pack` (of the built dist/), installed into a project outside the repository
 * from the npm cache, then the library example is type-checked and run against it and `agentd serve` runs
 * from it. Run by `npm run test:package` (which builds first), not by `npm test`.
 */

const run = promisify(execFile);
const repo = join(import.meta.dirname, '..', '..');
const rootPackage = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as {
  devDependencies: Record<string, string>;
  dependencies: Record<string, string>;
};

let scratch: string;
let project: string;

beforeAll(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'agentd-pack-'));
  // dist/ is built by the npm script; scripts stay off so packing does not rebuild it.
  const packed = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', scratch], {
    cwd: repo,
  });
  const tarball = join(scratch, (JSON.parse(packed.stdout) as Array<{ filename: string }>)[0]!.filename);
  project = join(scratch, 'project');
  cpSync(join(repo, 'examples', 'library'), project, {
    recursive: true,
    filter: (path) => !/[/\\](dist|node_modules|\.agentd)$/.test(path),
  });
  // Only the tarball and what the example itself needs, from the npm cache where it has them.
  writeFileSync(
    join(project, 'package.json'),
    JSON.stringify({ name: 'packed-api-test', private: true, type: 'module' }),
  );
  await run(
    'npm',
    [
      'install',
      tarball,
      `zod@${rootPackage.dependencies.zod}`,
      `@types/node@${rootPackage.devDependencies['@types/node']}`,
      '--prefer-offline',
      '--ignore-scripts',
      '--no-audit',
      '--no-fund',
      '--loglevel=error',
    ],
    { cwd: project },
  );
  // Install scripts are off (no network to fetch a prebuilt binary, and compiling takes minutes), so the
  // native SQLite driver is the repository's already-built copy of the same major version.
  const driver = join(project, 'node_modules', 'better-sqlite3');
  rmSync(driver, { recursive: true, force: true });
  symlinkSync(join(repo, 'node_modules', 'better-sqlite3'), driver, 'dir');
}, 240_000);
// The installed project is a few hundred MB.
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('the packed package', () => {
  it('type-checks the library example with tsc and runs a chat turn that calls its custom tool', async () => {
    // tsc prints its diagnostics on stdout: put them in the failure, not just the command line.
    await run(process.execPath, [join(repo, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', project], {
      cwd: project,
    }).catch((error: { stdout?: string; message: string }) => {
      throw new Error(`${error.message}\n${error.stdout ?? ''}`);
    });
    const example = await run(process.execPath, ['dist/main.js'], {
      cwd: project,
      env: { ...process.env, AGENTD_MODEL: '', AGENTD_HOME: '', AGENTD_LOG_LEVEL: 'warn' },
    });
    expect(example.stdout).toContain('tool word_count: 4 words');
    expect(example.stdout).toContain('completed: The text has 4 words.');
  }, 120_000);

  it('documents every export of its typings with TSDoc, and has a model factory per provider', () => {
    const entry = join(project, 'node_modules', 'agentd', 'dist', 'index.d.ts');
    const program = ts.createProgram([entry], {
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      target: ts.ScriptTarget.ES2022,
      noEmit: true,
    });
    const checker = program.getTypeChecker();
    const exported = checker.getExportsOfModule(checker.getSymbolAtLocation(program.getSourceFile(entry)!)!);
    const undocumented = exported
      .filter((symbol) => {
        const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
        return ts.displayPartsToString(target.getDocumentationComment(checker)).trim() === '';
      })
      .map((symbol) => symbol.name);
    expect(undocumented).toEqual([]);
    expect(exported.map((symbol) => symbol.name)).toEqual(
      expect.arrayContaining([
        'createRuntime',
        'defineTool',
        'defineAgent',
        'loadConfig',
        // openai/ and ollama/ share the OpenAI-compatible client.
        'createOpenAIModel',
        'createAnthropicModel',
        'createCommandModel',
        'createAcpModel',
        'createLocalModel',
        'resolveModel',
        'createStore',
        'ErrorCodes',
        'UserInputError',
        'ProviderError',
        'SystemError',
      ]),
    );
  });

  describe('agentd serve from the installed package', () => {
    let server: ChildProcess | undefined;
    let openai: FakeOpenAIServer;
    afterAll(async () => {
      server?.kill('SIGTERM');
      await openai?.close();
    });

    it('starts from a clean directory, answers /health and calls a tools.modules tool', async () => {
      openai = await startFakeOpenAIServer();
      openai.respond(
        {
          type: 'stream',
          toolCalls: [{ id: 'call_1', name: 'word_count', argumentChunks: ['{"text":"one two three"}'] }],
        },
        { type: 'stream', text: ['counted'] },
      );
      // The example's serve/agentd.yaml names ../dist/tools.js, compiled by the test above.
      server = spawn(
        process.execPath,
        [
          join(project, 'node_modules', 'agentd', 'bin', 'agentd.js'),
          '--config',
          'serve/agentd.yaml',
          'serve',
          '--port',
          '0',
          '--json',
        ],
        {
          cwd: project,
          env: {
            PATH: process.env.PATH,
            HOME: project,
            AGENTD_MODEL: 'openai/gpt-test',
            OPENAI_BASE_URL: openai.baseURL,
            AGENTD_LOG_LEVEL: 'warn',
          },
          stdio: ['ignore', 'pipe', 'inherit'],
        },
      );
      const started = await new Promise<{ url: string; token: string }>((resolve, reject) => {
        server!.once('exit', (code) => reject(new Error(`agentd serve exited with ${code}`)));
        // `--json` prints one pretty-printed object: collect lines until they parse.
        let text = '';
        createInterface({ input: server!.stdout! }).on('line', (line) => {
          text += line;
          if (line.startsWith('}')) resolve(JSON.parse(text));
        });
      });
      // What the container healthcheck sees (no token), then the full document (with it).
      const probe = await fetch(`${started.url}/health`);
      expect(probe.status).toBe(200);
      expect(await probe.json()).toMatchObject({ status: 'ok' });
      const health = (await (
        await fetch(`${started.url}/health`, { headers: { authorization: `Bearer ${started.token}` } })
      ).json()) as Record<string, any>;
      expect(health).toMatchObject({ status: 'ok', store: { mode: 'sqlite' } });

      const client = await connectGateway({ url: started.url.replace(/^http/, 'ws'), token: started.token });
      try {
        const final = new Promise<any>((resolve) => {
          client.onEvent((event, payload) => {
            if (event === 'chat' && payload.state === 'final') resolve(payload);
          });
        });
        await client.call('chat.send', {
          sessionKey: 'agent:main:main',
          message: 'count these words',
          idempotencyKey: 'packed-1',
        });
        expect((await final).message.content[0].text).toBe('counted');
      } finally {
        await client.close();
      }
      const toolResult = openai.requests[1]!.body.messages.find((message: any) => message.role === 'tool');
      expect(toolResult.content).toBe('3 words');
    }, 60_000);
  });
});
