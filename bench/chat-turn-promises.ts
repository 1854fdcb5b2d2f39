// How many promises a 1-client chat turn makes on the server, and where: the whole runtime (the tree's
// compiled dist/, or another tree's with --tree) serves one closed-loop OpenClaw client in this process; after
// a warm-up, V8's promise hook counts every promise made during the measured turns (the client makes none),
// and with --sites N names the N call sites that make the most, by the source line of agentd's first frame
// on each promise's stack. Each promise is an allocation and, once it settles, a reaction for the microtask
// queue: a count that does not drift with the host's speed, where a turn's CPU does (chat-turn-ab.ts). The
// other asynchronous resources the turns make (timers, immediates, next-tick callbacks, file requests) are
// counted by type beside them, through an async hook, and with --sites named by site the same way.
// A diagnostic, not a benchmark module:
//   npm run build && npx tsx bench/chat-turn-promises.ts [--warmup-ms 6000] [--measure-ms 4000] [--sites 20]
//     [--tree /tmp/before]
import { createHook } from 'node:async_hooks';
import { join } from 'node:path';
import { promiseHooks } from 'node:v8';
import { takeFlag } from './args.js';
import { openChatClient } from './chat-client.js';
import { closedLoop } from './chat-turn-driver.js';

const args = process.argv.slice(2);
const warmUpMs = Number(takeFlag(args, '--warmup-ms') ?? 6000);
const measureMs = Number(takeFlag(args, '--measure-ms') ?? 4000);
const sites = Number(takeFlag(args, '--sites') ?? 0);
const tree = takeFlag(args, '--tree');
const { serveRuntime } = (await import(
  tree ? join(tree, 'bench', 'runtime-server.ts') : './runtime-server.js'
)) as typeof import('./runtime-server.js');

const token = 'promises';
const server = await serveRuntime({ token });
const client = await openChatClient(`ws://127.0.0.1:${server.port}`, 'p', token);
await closedLoop([client], warmUpMs);

let made = 0;
const bySite = new Map<string, number>();
const agentdFrame = /\((?:file:\/\/)?(\/[^)]*\/(?:dist|src)\/[^):]+:\d+)/;
const stackLimit = Error.stackTraceLimit;
if (sites > 0) Error.stackTraceLimit = 12;
const siteOfStack = () =>
  agentdFrame.exec(new Error().stack ?? '')?.[1]?.replace(/^.*\/(dist|src)\//, '$1/') ?? '(no agentd frame)';
const stop = promiseHooks.onInit(() => {
  made++;
  if (sites === 0) return;
  const site = siteOfStack();
  bySite.set(site, (bySite.get(site) ?? 0) + 1);
});
const resourcesByType = new Map<string, number>();
const resourcesBySite = new Map<string, number>();
const resources = createHook({
  init(_asyncId, type) {
    if (type === 'PROMISE') return;
    resourcesByType.set(type, (resourcesByType.get(type) ?? 0) + 1);
    if (sites === 0) return;
    const site = `${type} ${siteOfStack()}`;
    resourcesBySite.set(site, (resourcesBySite.get(site) ?? 0) + 1);
  },
}).enable();
const { latencies } = await closedLoop([client], measureMs);
stop();
resources.disable();
const turns = latencies.length;
Error.stackTraceLimit = stackLimit;
console.log(`${tree ?? '.'}: ${(made / turns).toFixed(1)} promises a turn over ${turns} turns`);
for (const [site, count] of [...bySite].sort((left, right) => right[1] - left[1]).slice(0, sites))
  console.log(`${(count / turns).toFixed(2).padStart(7)}  ${site}`);
const otherResources = [...resourcesByType].sort((left, right) => right[1] - left[1]);
console.log(
  `other asynchronous resources a turn: ${otherResources.map(([type, count]) => `${type} ${(count / turns).toFixed(2)}`).join(', ') || 'none'}`,
);
for (const [site, count] of [...resourcesBySite].sort((left, right) => right[1] - left[1]).slice(0, sites))
  console.log(`${(count / turns).toFixed(2).padStart(7)}  ${site}`);
client.ws.close();
await server.stop();
