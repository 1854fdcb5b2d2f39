import { main } from '../../src/cli/main.js';
import type { CliIo } from '../../src/cli/output.js';

/** Runs agentd's CLI in this process and collects what it printed. */
export async function runCli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const io: CliIo = {
    stdout: (text) => {
      out += text;
    },
    stderr: (text) => {
      err += text;
    },
  };
  const code = await main(['node', 'agentd', ...args], io);
  return { code, out, err };
}
