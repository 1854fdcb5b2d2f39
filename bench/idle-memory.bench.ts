// Memory of idle sessions, as a deployment has it: the compiled server as `agentd serve` runs it (the bundled
// command line, `dist/cli-bundle/bin.js`, which bin/agentd.js imports; SQLite,
// the offline local model; no tsx), 1,000 sessions with two turns of history each from 100 WebSocket clients,
// then every client gone. The server reads its own memory on request (bench/memory-probe.ts), once
// without a forced gc (what the process holds) and once after gc and a pause (what it keeps). Needs
// `npm run build` first; without dist/ it says so and measures nothing.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openChatClient, sendChatTurn } from './chat-client.js';
import { startProbedServer } from './memory-probe.js';

const sessions = 1_000;
const turnsPerSession = 2;
const clientCount = 100;
const runs = 3;
const token = 'bench-idle-memory-token';
const binary = fileURLToPath(new URL('../dist/cli-bundle/bin.js', import.meta.url));

const mib = (bytes: number) => Number((bytes / 2 ** 20).toFixed(1));

async function measureOnce(run: number): Promise<Record<string, string | number>> {
  const home = mkdtempSync(join(tmpdir(), 'agentd-idle-memory-'));
  const server = await startProbedServer({
    entry: [binary],
    env: { PATH: process.env.PATH ?? '', AGENTD_HOME: home, AGENTD_TOKEN: token, AGENTD_LOG_LEVEL: 'error' },
  });
  try {
    const url = server.websocket;
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const rest = await server.read({ gc: true });
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
    const held = await server.read({ gc: false });
    const kept = await server.read({ gc: true });
    return {
      run,
      'RSS at rest MiB': mib(rest.usage.rss),
      'RSS, 1,000 idle sessions, no forced gc MiB': mib(held.usage.rss),
      'RSS, 1,000 idle sessions, after gc MiB': mib(kept.usage.rss),
      'MB after gc': Number((kept.usage.rss / 1e6).toFixed(1)),
      'JS heap used after gc MiB': mib(kept.heapUsedAfterGc!),
      'turns/s while filling': Math.round((sessions * turnsPerSession * 1000) / driveMs),
    };
  } finally {
    await server.stop();
    rmSync(home, { recursive: true, force: true });
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
      `The compiled server as agentd serve runs it (node dist/cli-bundle/bin.js serve, the bundled command line: SQLite in a temp AGENTD_HOME, the offline local model), ${sessions.toLocaleString('en')} sessions × ${turnsPerSession} turns from ${clientCount} clients, then every client closed and 1 s of quiet.`,
      'Readings by a probe preloaded into the server (bench/memory-probe.ts: --require, SIGUSR2): "no forced gc" reads process.memoryUsage() at once; "after gc" runs gc twice, reads the JS heap, and waits 1.5 s before reading RSS, since V8 hands freed pages back in the background. Node runs no idle-time GC, so a quiet server can stay near the first figure until its next allocations trigger one.',
      'Target (issue 14): 1,000 idle sessions with history ≤ 150 MB RSS.',
    ],
  };
}

export default {
  name: 'idle-memory',
  description: 'RSS of the compiled server holding 1,000 idle sessions with history (SQLite, local model)',
  run,
};
