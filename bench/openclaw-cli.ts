// Where the OpenClaw CLI is: the benchmarks that run the real peer (`openclaw`, `cli-startup`) look here.
import { accessSync, constants } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** OPENCLAW_BIN, else the wrapper scripts/install-openclaw.sh writes. */
export function findOpenClaw(): { bin: string | undefined; looked: string[] } {
  const looked = [
    process.env.OPENCLAW_BIN,
    join(process.env.AGENTD_OPENCLAW_DIR ?? join(homedir(), '.cache', 'agentd-openclaw'), 'bin', 'openclaw'),
  ].filter((candidate): candidate is string => Boolean(candidate));
  for (const candidate of looked) {
    try {
      accessSync(candidate, constants.X_OK);
      return { bin: candidate, looked };
    } catch {
      // the next one
    }
  }
  return { bin: undefined, looked };
}
