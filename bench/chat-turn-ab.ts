// Interleaved A/B of the 1-client chat turn between builds of agentd: the whole runtime of each tree
// (bench/chat-turn.bench.ts's sqlite server role, from that tree's dist/) serves one client in many short
// rounds, the trees taking turns, the order reversed every other round. On a shared VM the CPU a turn of one
// server varies by tens of percent from one second to the next, so only many interleaved rounds show a
// change of a few percent. Not a benchmark module (`npm run bench` does not run it):
//   git worktree add /tmp/before <rev> && ln -s "$PWD/node_modules" /tmp/before/node_modules \
//     && ln -s "$PWD/bench/node_modules" /tmp/before/bench/node_modules && (cd /tmp/before && npx tsc -p tsconfig.build.json)
//   npx tsx bench/chat-turn-ab.ts /tmp/before . [--rounds 40] [--round-ms 400]
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { takeFlag } from './args.js';
import { type ChatClient, openChatClient, sendChatTurn } from './chat-client.js';
import { forkRoleServer } from './runtime-server.js';

const args = process.argv.slice(2);
const rounds = Number(takeFlag(args, '--rounds') ?? 40);
const roundMs = Number(takeFlag(args, '--round-ms') ?? 400);
const roundWarmupMs = 300;
/** Each server first serves 10 clients this long, as the benchmark's do, so its code is optimised. */
const serverWarmupMs = 3000;
const token = 'bench-token';
const trees = args.map((tree) => resolve(tree));
if (trees.length < 2) {
  console.error('usage: chat-turn-ab <tree> <tree> [...] [--rounds 40] [--round-ms 400]');
  process.exit(2);
}

const turn = (client: ChatClient) => new Promise<number>((done) => sendChatTurn(client, done));

async function closedLoop(clients: ChatClient[], durationMs: number): Promise<number[]> {
  const latencies: number[] = [];
  const deadline = performance.now() + durationMs;
  await Promise.all(
    clients.map(async (client) => {
      while (performance.now() < deadline) latencies.push(await turn(client));
    }),
  );
  return latencies.sort((a, b) => a - b);
}

const median = (values: number[]) => values.slice().sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

const servers = [];
for (const tree of trees) {
  const { child, port } = await forkRoleServer({
    moduleUrl: pathToFileURL(`${tree}/bench/chat-turn.bench.ts`).href,
    roleVariable: 'AGENTD_CHAT_TURN_BENCH_ROLE',
    role: 'sqlite',
    execArgv: ['--import', 'tsx', '--expose-gc'],
  });
  const cpu = () =>
    new Promise<number>((done) => {
      const onMessage = (message: { type: string; value: number }) => {
        if (message.type !== 'cpu') return;
        child.off('message', onMessage);
        done(message.value);
      };
      child.on('message', onMessage);
      child.send({ type: 'cpu' });
    });
  const url = `ws://127.0.0.1:${port}/`;
  const warming = await Promise.all(
    Array.from({ length: 10 }, (_, index) => openChatClient(url, `warm-${index}`, token)),
  );
  await closedLoop(warming, serverWarmupMs);
  for (const client of warming) client.ws.terminate();
  const client = await openChatClient(url, 'ab', token);
  servers.push({ tree, child, cpu, client, cpuPerTurnUs: [] as number[], p50Ms: [] as number[] });
}
for (let round = 0; round < rounds; round++) {
  for (const server of round % 2 === 0 ? servers : [...servers].reverse()) {
    await closedLoop([server.client], roundWarmupMs);
    const before = await server.cpu();
    const latencies = await closedLoop([server.client], roundMs);
    server.cpuPerTurnUs.push(((await server.cpu()) - before) / latencies.length);
    server.p50Ms.push(latencies[Math.floor(latencies.length / 2)]!);
  }
}
const [first] = servers;
console.log(`${rounds} interleaved rounds of ${roundMs} ms after ${roundWarmupMs} ms, 1 client per server:`);
for (const server of servers) {
  const cpuRatios = server.cpuPerTurnUs.map((value, index) => value / first!.cpuPerTurnUs[index]!);
  console.log(
    `${server.tree}: CPU a turn median ${Math.round(median(server.cpuPerTurnUs))} µs, p50 median ${median(server.p50Ms).toFixed(3)} ms; ` +
      `per round ÷ the first tree's: CPU median ×${median(cpuRatios).toFixed(3)}`,
  );
  server.client.ws.terminate();
  server.child.send({ type: 'stop' });
}
