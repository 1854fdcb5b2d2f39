// Rebuilds better-sqlite3's native module with native/sqlite-wal-batch.c appended to its SQLite, so a commit
// reaches the write-ahead log in one write instead of two a page (docs/storage.md, decision 0051). Run by
// `npm ci` in this repository (the `prepare` script); `node scripts/build-sqlite.mjs [<better-sqlite3 dir>]`
// does the same for another install, such as the package installed from its tarball.
//
// The build happens in a copy of the package, and only a module that loads and reports the batching VFS
// replaces the installed one: a machine without a compiler keeps the stock module, which agentd runs on
// unchanged (with the extra writes). A stamp beside the module skips the build when nothing has changed.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  copyFileSync,
  cpSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';

const root = join(import.meta.dirname, '..');
const shimPath = join(root, 'native', 'sqlite-wal-batch.c');
const packageDir = process.argv[2]
  ? resolve(process.argv[2])
  : dirname(createRequire(join(root, 'package.json')).resolve('better-sqlite3/package.json'));
const moduleFile = join(packageDir, 'build', 'Release', 'better_sqlite3.node');
const stampFile = join(packageDir, 'build', 'agentd-wal-batch.json');
const initName = 'agentd_wal_batch_init';
const beginMarker = '/* agentd: sqlite-wal-batch.c begins */';

const shim = readFileSync(shimPath, 'utf8');
const { version } = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8'));
const stamp = JSON.stringify({
  betterSqlite3: version,
  node: process.versions.modules,
  shim: createHash('sha256').update(shim).digest('hex'),
});

/** Whether the module at `file` loads and has the batching VFS as its default (a child process: it stays loaded). */
function reportsBatching(file) {
  const probe = spawnSync(
    process.execPath,
    [
      '-e',
      `const Database = require(${JSON.stringify(join(packageDir, 'lib', 'database.js'))});
       const db = new Database(':memory:', { nativeBinding: ${JSON.stringify(file)} });
       process.stdout.write(db.prepare('SELECT agentd_wal_batch() AS report').get().report);`,
    ],
    { encoding: 'utf8', env: { ...process.env, AGENTD_SQLITE_WAL_BATCH: '1' } },
  );
  if (probe.status !== 0) return false;
  try {
    return JSON.parse(probe.stdout).active === true;
  } catch {
    return false;
  }
}

function nodeGyp() {
  if (process.env.npm_config_node_gyp) return process.env.npm_config_node_gyp;
  const npmCli = process.env.npm_execpath;
  const candidates = [
    npmCli && join(dirname(npmCli), '..', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'),
    join(dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'),
  ];
  return candidates.find((candidate) => candidate && existsSync(candidate));
}

/** npm's `nodedir` (Node's headers on a machine without network), which npm hands to node-gyp in its scripts. */
function nodeDirFlag() {
  let nodeDir = process.env.npm_config_nodedir;
  if (nodeDir === undefined) {
    const asked = spawnSync('npm', ['config', 'get', 'nodedir'], { encoding: 'utf8' });
    nodeDir = asked.status === 0 ? asked.stdout.trim() : '';
  }
  return nodeDir && nodeDir !== 'undefined' && nodeDir !== 'null' ? [`--nodedir=${nodeDir}`] : [];
}

if (existsSync(stampFile) && readFileSync(stampFile, 'utf8') === stamp && reportsBatching(moduleFile)) {
  process.exit(0);
}

const gyp = nodeGyp();
if (!gyp) {
  console.warn('build-sqlite: node-gyp not found; better-sqlite3 keeps its stock SQLite (two WAL writes a page).');
  process.exit(0);
}

const work = mkdtempSync(join(tmpdir(), 'agentd-sqlite-build-'));
try {
  const copy = join(work, 'better-sqlite3');
  cpSync(packageDir, copy, { recursive: true, filter: (source) => !source.startsWith(join(packageDir, 'build')) });
  const amalgamation = join(copy, 'deps', 'sqlite3', 'sqlite3.c');
  const sqlite = readFileSync(amalgamation, 'utf8');
  const cut = sqlite.indexOf(beginMarker);
  writeFileSync(amalgamation, `${cut === -1 ? sqlite : sqlite.slice(0, cut)}\n${beginMarker}\n${shim}`);
  const defines = join(copy, 'deps', 'defines.gypi');
  const gypi = readFileSync(defines, 'utf8');
  if (!gypi.includes(initName)) {
    writeFileSync(defines, gypi.replace("'defines': [", `'defines': [\n    'SQLITE_EXTRA_INIT=${initName}',`));
  }
  console.log(`build-sqlite: compiling better-sqlite3 ${version} with the WAL batching VFS (about a minute)`);
  const built = spawnSync(process.execPath, [gyp, 'rebuild', '--release', '-j', 'max', ...nodeDirFlag()], {
    cwd: copy,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  const candidate = join(copy, 'build', 'Release', 'better_sqlite3.node');
  if (built.status !== 0 || !existsSync(candidate) || !reportsBatching(candidate)) {
    console.warn(`${built.stderr ?? ''}`.split('\n').slice(-30).join('\n'));
    console.warn('build-sqlite: the build failed; better-sqlite3 keeps its stock SQLite (two WAL writes a page).');
    process.exit(0);
  }
  // Into place by rename, so a process loading the module meanwhile sees the old one or the new one.
  const staged = `${moduleFile}.agentd-${process.pid}`;
  copyFileSync(candidate, staged);
  renameSync(staged, moduleFile);
  writeFileSync(stampFile, stamp);
  console.log('build-sqlite: done; SQLite commits reach the WAL in one write');
} finally {
  rmSync(work, { recursive: true, force: true });
}
