// Memory of idle sessions, as a deployment has it: the compiled server (`node dist/cli/bin.js serve`, SQLite,
// the offline local model; no tsx), 1,000 sessions with two turns of history each from 100 WebSocket clients,
// then every client gone. The server reads its own memory on request (a preloaded probe: SIGUSR2), once
// without a forced gc (what the process holds) and once after gc and a pause (what it keeps). Needs
// `npm run build` first; without dist/ it says so and measures nothing.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openChatClient, sendChatTurn } from './chat-client.js';

const sessions = 1_000;
const turnsPerSession = 2;
const clientCount = 100;
const runs = 3;
const token = 'bench-idle-memory-token';
const binary = fileURLToPath(new URL('../dist/cli/bin.js', import.meta.url));

// Preloaded into the server with --require: on SIGUSR2 it reads the request file, optionally collects
// garbage and waits for freed pages to leave, then writes process.memoryUsage() next to it.
const probeSource = `
const fs = require('node:fs');
const dir = process.env.AGENTD_BENCH_PROBE_DIR;
process.on('SIGUSR2', () => {
  const request = JSON.parse(fs.readFileSync(dir + '/request.json', 'utf8'));
  if (request.gc) { global.gc(); global.gc(); }
  setTimeout(() => fs.writeFileSync(dir + '/' + request.id + '.json', JSON.stringify(process.memoryUsage())), request.gc ? 1500 : 0);
});
`;

interface Reading {
  rssMiB: number;
  heapUsedMiB: number;
}

const mib = (bytes: number) => Number((bytes / 2 ** 20).toFixed(1));

async function read(child: ChildProcess, probeDir: string, id: string, gc: boolean): Promise<Reading> {
  writeFileSync(join(probeDir, 'request.json'), JSON.stringify({ id, gc }));
  child.kill('SIGUSR2');
  const file = join(probeDir, `${id}.json`);
  const deadline = Date.now() + 30_000;
  while (!existsSync(file)) {
    if (Date.now() > deadline) throw new Error('the server did not answer the memory probe');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await new Promise((resolve) => setTimeout(resolve, 50));
  const usage = JSON.parse(readFileSync(file, 'utf8')) as NodeJS.MemoryUsage;
  return { rssMiB: mib(usage.rss), heapUsedMiB: mib(usage.heapUsed) };
}

async function measureOnce(run: number): Promise<Record<string, string | number>> {
  const home = mkdtempSync(join(tmpdir(), 'agentd-idle-memory-'));
  const probeDir = mkdtempSync(join(tmpdir(), 'agentd-idle-probe-'));
  writeFileSync(join(probeDir, 'probe.cjs'), probeSource);
  const child = spawn(
    process.execPath,
    ['--expose-gc', '--require', join(probeDir, 'probe.cjs'), binary, 'serve', '--port', '0', '--json'],
    {
      env: {
        PATH: process.env.PATH ?? '',
        AGENTD_HOME: home,
        AGENTD_TOKEN: token,
        AGENTD_LOG_LEVEL: 'error',
        AGENTD_BENCH_PROBE_DIR: probeDir,
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  try {
    const started = await new Promise<{ websocket?: string; url?: string }>((resolve, reject) => {
      let output = '';
      child.stdout!.on('data', (chunk) => {
        output += chunk;
        try {
          resolve(JSON.parse(output));
        } catch {
          // The line is not complete yet.
        }
      });
      child.once('exit', (code) => reject(new Error(`agentd serve exited with ${code}`)));
    });
    const url = started.websocket ?? started.url;
    if (!url) throw new Error('agentd serve did not print its WebSocket address');
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const rest = await read(child, probeDir, 'rest', true);
    const startedMs = Date.now();
    const clients = await Promise.all(
      Array.from({ length: clientCount }, (_, index) => openChatClient(url, `idle-${index}`, token)),
    );
    await Promise.all(
      clients.map(async (client, index) => {
        for (let session = 0; session < sessions / clientCount; session++) {
          client.sessionKey = `agent:main:idle-${index}-s${session}`;
          for (let count = 0; count < turnsPerSession; count++)
            await new Promise<void>((resolve) => sendChatTurn(client, () => resolve()));
        }
      }),
    );
    const driveMs = Date.now() - startedMs;
    for (const client of clients) client.ws.terminate();
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const held = await read(child, probeDir, 'held', false);
    const kept = await read(child, probeDir, 'kept', true);
    return {
      run,
      'RSS at rest MiB': rest.rssMiB,
      'RSS, 1,000 idle sessions, no forced gc MiB': held.rssMiB,
      'RSS, 1,000 idle sessions, after gc MiB': kept.rssMiB,
      'MB after gc': Number(((kept.rssMiB * 2 ** 20) / 1e6).toFixed(1)),
      'JS heap used after gc MiB': kept.heapUsedMiB,
      'turns/s while filling': Math.round((sessions * turnsPerSession * 1000) / driveMs),
    };
  } finally {
    child.kill('SIGTERM');
    await new Promise((resolve) => {
      if (child.exitCode !== null) resolve(undefined);
      else child.once('exit', resolve);
    });
    rmSync(home, { recursive: true, force: true });
    rmSync(probeDir, { recursive: true, force: true });
  }
}

async function run() {
  if (!existsSync(binary)) {
    return { rows: [], notes: [`${binary} is missing: run \`npm run build\` first; nothing was measured.`] };
  }
  const rows: Array<Record<string, string | number>> = [];
  for (let index = 1; index <= runs; index++) rows.push(await measureOnce(index));
  return {
    rows,
    notes: [
      `The compiled server (node dist/cli/bin.js serve: SQLite in a temp AGENTD_HOME, the offline local model), ${sessions.toLocaleString('en')} sessions × ${turnsPerSession} turns from ${clientCount} clients, then every client closed and 1 s of quiet.`,
      'Readings by a probe preloaded into the server (--require, SIGUSR2): "no forced gc" reads process.memoryUsage() at once; "after gc" runs gc twice and waits 1.5 s, since V8 hands freed pages back in the background. Node runs no idle-time GC, so a quiet server can stay near the first figure until its next allocations trigger one.',
      'Target (issue 14): 1,000 idle sessions with history ≤ 150 MB RSS.',
    ],
  };
}

export default {
  name: 'idle-memory',
  description: 'RSS of the compiled server holding 1,000 idle sessions with history (SQLite, local model)',
  run,
};
