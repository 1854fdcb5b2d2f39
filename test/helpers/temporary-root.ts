import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * vitest's global setup: the temporary directories the tests make under `os.tmpdir()` (homes, databases,
 * workspaces) go into one directory of this run, which is removed when the run ends. Test files clean up
 * after themselves unevenly, and a full run used to leave some 400 directories (about 60 MB) in /tmp. The
 * test processes are started after this runs and inherit TMPDIR, as do the processes they spawn with the
 * environment.
 */
export default function setup(): () => void {
  const root = mkdtempSync(join(tmpdir(), 'agentd-test-run-'));
  process.env.TMPDIR = root;
  return () => rmSync(root, { recursive: true, force: true });
}
