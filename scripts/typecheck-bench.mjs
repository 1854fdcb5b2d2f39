// Type-checks bench/ against its peer frameworks when they are installed (`npm run bench` installs them);
// without them there is nothing to check those imports against, and it says so.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..');
if (!existsSync(join(root, 'bench', 'node_modules'))) {
  console.log('typecheck: bench/ not checked: its peers are not installed (npm --prefix bench ci)');
  process.exit(0);
}
const result = spawnSync(
  process.execPath,
  [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(root, 'bench', 'tsconfig.json')],
  { stdio: 'inherit' },
);
process.exit(result.status ?? 1);
