// An `agentd serve` child with a memory probe preloaded (node --expose-gc --require probe.cjs): the server
// reads its own memory on request, so the figures are the server's and not the driver's. A request is a
// JSON file and SIGUSR2; the answer is another file next to it. Used by idle-memory and soak.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// On SIGUSR2 the probe reads request.json. With `gc` it collects garbage twice and notes the heap at once
// (later allocations by a loaded server would blur it), then waits for freed pages to go back to the
// system before it reads the rest; with `snapshot` it then writes a V8 heap snapshot to that path, so the
// snapshot holds what that collection left.
const probeSource = `
const fs = require('node:fs');
const v8 = require('node:v8');
const dir = process.env.AGENTD_BENCH_PROBE_DIR;
process.on('SIGUSR2', () => {
  const request = JSON.parse(fs.readFileSync(dir + '/request.json', 'utf8'));
  let heapUsedAfterGc;
  if (request.gc) {
    global.gc();
    global.gc();
    heapUsedAfterGc = process.memoryUsage().heapUsed;
  }
  if (request.snapshot) v8.writeHeapSnapshot(request.snapshot);
  setTimeout(() => {
    const answer = JSON.stringify({ usage: process.memoryUsage(), heapUsedAfterGc });
    fs.writeFileSync(dir + '/' + request.id + '.tmp', answer);
    fs.renameSync(dir + '/' + request.id + '.tmp', dir + '/' + request.id + '.json');
  }, request.gc ? 1500 : 0);
});
`;

export interface MemoryReading {
  /** process.memoryUsage() when the probe answered (after the pause that follows a forced gc). */
  usage: NodeJS.MemoryUsage;
  /** JS heap used right after two forced collections; only when the request asked for gc. */
  heapUsedAfterGc?: number;
}

export interface ProbedServer {
  child: ChildProcess;
  /** From the server's start-up line. */
  websocket: string;
  token: string;
  read(options: { gc: boolean; snapshot?: string }): Promise<MemoryReading>;
  /** SIGTERM, wait for the exit, remove the probe's files. */
  stop(): Promise<void>;
}

/**
 * Starts `node <probe> ...entry serve --port 0 --json` and waits for its start-up line.
 * `entry` is what runs the CLI: the compiled bin, or `--import tsx src/cli/bin.ts`.
 */
export async function startProbedServer(options: {
  entry: string[];
  env: NodeJS.ProcessEnv;
  cwd?: string;
}): Promise<ProbedServer> {
  const dir = mkdtempSync(join(tmpdir(), 'agentd-bench-probe-'));
  writeFileSync(join(dir, 'probe.cjs'), probeSource);
  const child = spawn(
    process.execPath,
    ['--expose-gc', '--require', join(dir, 'probe.cjs'), ...options.entry, 'serve', '--port', '0', '--json'],
    {
      cwd: options.cwd,
      env: { ...options.env, AGENTD_BENCH_PROBE_DIR: dir },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  };
  let requests = 0;
  const read = async (request: { gc: boolean; snapshot?: string }) => {
    const id = `reading-${++requests}`;
    writeFileSync(join(dir, 'request.json'), JSON.stringify({ id, ...request }));
    child.kill('SIGUSR2');
    const file = join(dir, `${id}.json`);
    // A heap snapshot of a few hundred MB takes a while to write.
    const deadline = Date.now() + (request.snapshot ? 300_000 : 30_000);
    while (!existsSync(file)) {
      if (Date.now() > deadline) throw new Error('the server did not answer the memory probe');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    return JSON.parse(readFileSync(file, 'utf8')) as MemoryReading;
  };
  try {
    const started = await new Promise<{ websocket: string; token: string }>((resolve, reject) => {
      let output = '';
      child.stdout!.on('data', (chunk) => {
        output += String(chunk);
        try {
          resolve(JSON.parse(output));
        } catch {
          // The start-up line is not complete yet.
        }
      });
      child.once('exit', (code) => reject(new Error(`agentd serve exited with ${code}`)));
    });
    return { child, websocket: started.websocket, token: started.token, read, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
