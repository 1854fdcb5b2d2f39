import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { connectGateway } from '../../src/cli/gateway-client.js';
import { ledgerEntryTypes } from '../../src/ledger/index.js';
import { skillProposalStatuses } from '../../src/skills/index.js';
import { workStates } from '../../src/work/index.js';
import { startFakeOpenAIServer } from '../helpers/fake-openai-server.js';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

/**
 * A module hook that reports every file a process loads (of the repository's `src/`, and the packages) to
 * `loadedList`, and every child it starts synchronously to stderr: the `--import` arguments that install it.
 */
function moduleHook(dir: string): { nodeArgs: string[]; loadedList: string } {
  const loadedList = join(dir, 'loaded.txt');
  // The hooks run on a thread of their own: written to a file at once, a module's line is there before the
  // module runs, however soon the process exits (a line written to stderr from that thread could be lost).
  writeFileSync(
    join(dir, 'hooks.mjs'),
    `import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  if (resolved.url.startsWith('file:')) appendFileSync(${JSON.stringify(loadedList)}, resolved.url + '\\n');
  return resolved;
}
`,
  );
  // The resolve hook sees what is imported; what is required (the CLI requires `ws`) is in require's cache.
  // Child processes started synchronously are reported too.
  writeFileSync(
    join(dir, 'register.mjs'),
    `import { createRequire, register, syncBuiltinESMExports } from 'node:module';
import { pathToFileURL } from 'node:url';
register('./hooks.mjs', import.meta.url);
const require = createRequire(import.meta.url);
const childProcess = require('node:child_process');
const spawnSync = childProcess.spawnSync;
childProcess.spawnSync = (file, ...rest) => {
  process.stderr.write('SPAWNED ' + file + '\\n');
  return spawnSync(file, ...rest);
};
syncBuiltinESMExports();
const required = require.cache;
process.on('exit', () => {
  for (const path of Object.keys(required)) process.stderr.write(pathToFileURL(path).href + '\\n');
});
`,
  );
  return { nodeArgs: ['--import', 'tsx', '--import', join(dir, 'register.mjs')], loadedList };
}

/** The repository's files among a hook's lines (`file:` URLs), as paths relative to its root. */
const loadedPaths = (lines: string) =>
  lines
    .split('\n')
    .filter((line) => line.startsWith('file:'))
    .map((line) => relative(repoRoot, fileURLToPath(line)));

/** `node_modules/<name>/…` or `node_modules/@scope/<name>/…` → the package's name. */
const packagesOf = (paths: string[]) =>
  new Set(
    paths.flatMap((path) => {
      const match = /^node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(path);
      return match?.[1] ? [match[1]] : [];
    }),
  );

/** Runs the CLI from source in a process of its own, with the module hook: which subsystems a command starts with. */
function runWithModules(
  args: string[],
  home?: string,
): {
  status: number | null;
  stdout: string;
  modules: string[];
  packages: Set<string>;
  home: string;
  spawned: string[];
} {
  const dir = mkdtempSync(join(tmpdir(), 'agentd-cli-startup-'));
  const { nodeArgs, loadedList } = moduleHook(dir);
  const result = spawnSync(
    process.execPath,
    [...nodeArgs, 'src/cli/bin.ts', '--home', home ?? dir, ...args],
    {
      cwd: repoRoot,
      encoding: 'utf8',
      timeout: 60_000,
      env: { ...process.env, AGENTD_LOG_LEVEL: 'silent' },
    },
  );
  const imported = existsSync(loadedList) ? readFileSync(loadedList, 'utf8') : '';
  const loaded = loadedPaths(`${imported}\n${result.stderr}`);
  const modules = [...new Set(loaded.filter((path) => path.startsWith('src/')))];
  const spawned = result.stderr
    .split('\n')
    .filter((line) => line.startsWith('SPAWNED '))
    .map((line) => line.slice('SPAWNED '.length));
  return {
    status: result.status,
    stdout: result.stdout,
    modules,
    packages: packagesOf(loaded),
    home: home ?? dir,
    spawned,
  };
}

/** Nothing listens on port 9: a gateway command fails to connect, after deciding what to load. */
const runAgainstClosedGateway = (args: string[]) =>
  runWithModules([...args, '--url', 'ws://127.0.0.1:9', '--token', 't']);

/** What a command that prints or talks to a gateway has no use for: the configuration, its schemas, files. */
const configurationModules = { folders: ['src/config', 'src/ledger'], packages: ['zod', 'yaml'] };

const loadedFolders = (modules: string[]) =>
  new Set(modules.map((path) => path.split('/').slice(0, 2).join('/').replace(/\.ts$/, '')));

describe('the CLI starts without the runtime', () => {
  it.each([
    [['--version'], /^\d+\.\d+\.\d+/],
    [['--help'], /Usage: agentd/],
  ])('prints `%s` with no subsystem, no configuration and no WebSocket loaded', (args, expected) => {
    const { status, stdout, modules, packages } = runWithModules(args);
    expect(status).toBe(0);
    expect(stdout.trim()).toMatch(expected);
    // The hook saw the CLI itself and its command-line parser: the checks below are about what it left out.
    expect(modules).toContain('src/cli/main.ts');
    expect(packages.has('commander')).toBe(true);
    const folders = loadedFolders(modules);
    for (const heavy of [
      'src/runtime',
      'src/store',
      'src/memory',
      'src/work',
      'src/workflow',
      'src/model',
      ...configurationModules.folders,
    ])
      expect(folders.has(heavy), `${heavy} loaded`).toBe(false);
    for (const name of [...configurationModules.packages, 'ws'])
      expect(packages.has(name), `${name} loaded`).toBe(false);
  });

  it.each([
    ['work', 'list', '--help'],
    ['work', 'help', 'list'],
  ])(
    "lists the work states in `%s %s %s`, loading the work queue's module but not the runtime",
    (...args) => {
      const { status, stdout, modules } = runWithModules(args);
      expect(status).toBe(0);
      expect(stdout.replace(/\s+/g, ' ')).toContain(`comma-separated: ${workStates.join(', ')}`);
      const folders = loadedFolders(modules);
      expect(folders.has('src/work')).toBe(true);
      expect(folders.has('src/runtime')).toBe(false);
    },
  );

  it.each([
    ['work', 'list'],
    ['send', 'hello'],
    ['status', '--json'],
  ])('loads neither the runtime nor the configuration for `%s %s --url`', (...args) => {
    const { status, modules, packages } = runAgainstClosedGateway(args);
    expect(status).not.toBe(0);
    expect(modules).toContain('src/cli/gateway-client.ts');
    expect(packages.has('ws')).toBe(true);
    const folders = loadedFolders(modules);
    for (const unused of ['src/work', 'src/runtime', 'src/store', ...configurationModules.folders])
      expect(folders.has(unused), `${unused} loaded`).toBe(false);
    for (const name of configurationModules.packages)
      expect(packages.has(name), `${name} loaded`).toBe(false);
  });

  it("formats a work item's ledger for `ledger show --url` without zod", () => {
    const { status, modules, packages } = runAgainstClosedGateway(['ledger', 'show', 'wi_1']);
    expect(status).not.toBe(0);
    // The ledger's formatter and entry types loaded; its append schema (zod) did not.
    expect(modules).toContain('src/ledger/ledger.ts');
    expect(modules).toContain('src/cli/gateway-client.ts');
    expect(packages.has('zod')).toBe(false);
  });

  it('answers `send` in-process on SQLite without the packages of features it does not use', () => {
    const { status, stdout, modules, packages, spawned } = runWithModules(['send', 'hello']);
    expect(status).toBe(0);
    expect(stdout).toContain('[local model]');
    // The runtime and its database driver did load: the checks below are about what it left out.
    expect(loadedFolders(modules).has('src/runtime')).toBe(true);
    expect(packages.has('better-sqlite3')).toBe(true);
    // Postgres's driver, the MCP client (no server configured), the ACP client (no ACP model), RE2 (no
    // search ran), the gateway's server with `ws` (nothing serves), the workflow engine (no workflow ran)
    // and the OpenTelemetry API (nothing registered with it) load when first used.
    for (const name of [
      'pg',
      '@modelcontextprotocol/sdk',
      '@agentclientprotocol/sdk',
      're2js',
      'ws',
      '@opentelemetry/api',
    ])
      expect(packages.has(name), `${name} loaded`).toBe(false);
    // The gateway's and the workflows' methods are registered (their tables, schemas and handlers load); the
    // server and the workflow engine are not.
    expect(modules).toContain('src/gateway/method-table.ts');
    expect(modules).toContain('src/workflow/gateway-methods.ts');
    for (const unused of [
      'src/gateway/server.ts',
      'src/gateway/static-site.ts',
      'src/gateway/openclaw-connection.ts',
      'src/workflow/engine/index.ts',
      'src/workflow/loader.ts',
      'src/workflow/validate.ts',
    ])
      expect(modules, `${unused} loaded`).not.toContain(unused);
    // No hook and no bash: `unshare` is not probed (a child process) for children that never start.
    expect(spawned).toEqual([]);
  });

  it("answers a second `send` without the YAML parser: the first kept the skills' front matter", () => {
    // The first turn in a new home reads the example skill's front matter with the parser.
    const first = runWithModules(['send', 'hello']);
    expect(first.status).toBe(0);
    expect(first.packages.has('yaml')).toBe(true);
    const second = runWithModules(['send', 'hello again'], first.home);
    expect(second.status).toBe(0);
    expect(second.stdout).toContain('[local model]');
    expect(second.modules).toContain('src/skills/frontmatter-cache.ts');
    expect(second.packages.has('yaml')).toBe(false);
  });

  it('makes a runtime for `status` without the YAML parser when there is no document to read', () => {
    const { status, stdout, modules, packages } = runWithModules(['status', '--json']);
    expect(status).toBe(0);
    expect(JSON.parse(stdout)).toHaveProperty('sessions');
    expect(loadedFolders(modules).has('src/runtime')).toBe(true);
    // No agentd.yaml, no workflow, and no turn that would list the skills' front matter.
    expect(packages.has('yaml')).toBe(false);
  });

  it('lists the ledger entry types in `ledger show --help`', () => {
    const { status, stdout } = runWithModules(['ledger', 'show', '--help']);
    expect(status).toBe(0);
    expect(stdout.replace(/\s+/g, ' ')).toContain(`only one entry type: ${ledgerEntryTypes.join(', ')}`);
  });

  it('lists the proposal statuses in `skills proposals --help`', () => {
    const { status, stdout, modules } = runWithModules(['skills', 'proposals', '--help']);
    expect(status).toBe(0);
    expect(stdout.replace(/\s+/g, ' ')).toContain(`only one status: ${skillProposalStatuses.join(', ')}`);
    expect(loadedFolders(modules).has('src/runtime')).toBe(false);
  });
});

/** A long-running command from source with the module hook and the OpenAI-compatible provider on `baseURL`. */
function startWithModules(args: string[], baseURL: string) {
  const dir = mkdtempSync(join(tmpdir(), 'agentd-cli-prepare-'));
  const { nodeArgs, loadedList } = moduleHook(dir);
  // stdin stays open and silent: the command waits for its first input.
  const child = spawn(process.execPath, [...nodeArgs, 'src/cli/bin.ts', '--home', dir, ...args], {
    cwd: repoRoot,
    env: {
      ...process.env,
      AGENTD_LOG_LEVEL: 'silent',
      AGENTD_TOKEN: 'prepare-token',
      AGENTD_MODEL: 'openai/gpt-test',
      OPENAI_BASE_URL: baseURL,
      OPENAI_API_KEY: 'sk-test',
    },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => {
    output += chunk.toString('utf8');
  });
  return {
    output: () => output,
    /** Whether the SDK's files were loaded, waiting for them up to 15 s. */
    async loadedSdk(): Promise<boolean> {
      const loaded = () =>
        existsSync(loadedList) && packagesOf(loadedPaths(readFileSync(loadedList, 'utf8'))).has('openai');
      for (let waited = 0; !loaded() && waited < 15_000 && child.exitCode === null; waited += 50)
        await new Promise((resolve) => setTimeout(resolve, 50));
      return loaded();
    },
    async stop() {
      child.kill('SIGTERM');
      await new Promise((resolve) =>
        child.exitCode === null ? child.once('exit', resolve) : resolve(undefined),
      );
    },
  };
}

describe('a command that waits for its first message', () => {
  it.each([
    ['serve', ['serve', '--port', '0']],
    ['chat', ['chat']],
    ['mcp serve', ['mcp', 'serve']],
    ['acp', ['acp']],
  ])(
    "`%s` loads the model provider's SDK before it, without calling the provider",
    async (_name, args) => {
      const model = await startFakeOpenAIServer();
      const command = startWithModules(args, model.baseURL);
      try {
        expect(await command.loadedSdk(), command.output()).toBe(true);
        expect(model.requests).toHaveLength(0);
      } finally {
        await command.stop();
        await model.close();
      }
    },
    30_000,
  );

  it('`serve` answers the first turn with the client it prepared', async () => {
    const model = await startFakeOpenAIServer();
    const command = startWithModules(['serve', '--port', '0'], model.baseURL);
    try {
      expect(await command.loadedSdk()).toBe(true);
      const url = /listening on (http:\/\/\S+)/.exec(command.output())?.[1]?.replace(/^http/, 'ws');
      expect(url).toBeDefined();
      model.respond({ type: 'stream', text: ['Prepared ', 'reply.'] });
      const client = await connectGateway({ url: url!, token: 'prepare-token' });
      try {
        const reply = new Promise<unknown>((resolve) => {
          client.onEvent((event, payload) => {
            if (event === 'chat' && ['final', 'error', 'aborted'].includes(payload?.state)) resolve(payload);
          });
        });
        await client.call('chat.send', {
          sessionKey: 'agent:main:main',
          message: 'hi',
          idempotencyKey: 'prep-1',
        });
        expect(JSON.stringify(await reply)).toContain('Prepared reply.');
        expect(model.requests).toHaveLength(1);
      } finally {
        await client.close();
      }
    } finally {
      await command.stop();
      await model.close();
    }
  }, 30_000);
});
