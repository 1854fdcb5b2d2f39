// Bundles the compiled command line (dist/cli/bin.js) into dist/cli-bundle/: agentd's own modules in a few
// chunks instead of some 300 files, each of which Node resolves, reads and links on every start. Packages stay
// external (one copy of zod and the rest, shared with the library and with tool modules). The commands' lazy
// imports become chunks of their own, loaded when a command needs them. The sandbox's worker is an entry of
// its own beside them, where the pool looks for it (`./worker.js` next to the pool's code).
// The library (dist/index.js) is not bundled: its users import the modules. See docs/decisions/0032.
import { rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = fileURLToPath(new URL('..', import.meta.url));
const outdir = `${root}dist/cli-bundle`;
rmSync(outdir, { recursive: true, force: true });
await build({
  absWorkingDir: root,
  entryPoints: ['dist/cli/bin.js', 'dist/sandbox/worker.js'],
  entryNames: '[name]',
  outdir,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  packages: 'external',
  logLevel: 'warning',
});
