// Interleaved A/B of one OpenAI-compatible model call between builds of agentd, in one process: the CPU of
// `streamModel(createOpenAIModel(...))` from each tree's dist/, sending the request a served chat turn sends
// (its tools, system prompt and history) to a fake Chat Completions server in a worker thread that answers
// every call with the same three-chunk stream. The request is taken from this tree's whole runtime:
// it serves chat turns with that server as its model, which keeps the last body it received; the body's
// history and tools are then handed to each call frozen, as memory's context and the tool registry hand
// theirs out, with the system prompt unfrozen and a new user message each call, as a chat turn has them.
// The CPU is the process's (both threads: the fake server parses each body too), rounds of calls alternating
// between the trees, the order reversed every other round. Not a benchmark module (`npm run bench` does not
// run it); the trees need dist/ built (see bench/chat-turn-ab.ts for a worktree of an older revision):
//   npx tsx bench/model-request-ab.ts /tmp/before . [--rounds 12] [--calls 500] [--turns 300]

import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import type { ModelMessage, ModelRequest, ModelToolDefinition } from '../src/model/index.js';
import { deepFreeze } from '../src/util/index.js';
import { openAIChunk, sseData } from '../test/helpers/fake-openai-server.js';
import { takeFlag } from './args.js';
import { sendChatTurn } from './chat-client.js';
import { connect } from './chat-turn-driver.js';
import { assertRuntimeBuilt, serveRuntime } from './runtime-server.js';
import { importFromTrees, interleavedRounds, printTreeTable, treesFrom } from './tree-ab.js';

const args = process.argv.slice(2);
const rounds = Number(takeFlag(args, '--rounds') ?? 12);
const callsPerRound = Number(takeFlag(args, '--calls') ?? 500);
const capturedTurns = Number(takeFlag(args, '--turns') ?? 300);

/** The fake Chat Completions server (this file in a worker thread): a three-chunk answer, the last body kept. */
function serveFakeModel(): void {
  const reply = [
    sseData(openAIChunk({ role: 'assistant', content: 'Hello from' }, null, 'fake-model')),
    sseData(openAIChunk({ content: ' the model.' }, null, 'fake-model')),
    sseData(openAIChunk({}, 'stop', 'fake-model')),
    sseData('[DONE]'),
  ].join('');
  let lastBody = '';
  const server = createServer((request, response) => {
    const parts: Buffer[] = [];
    request.on('data', (part: Buffer) => parts.push(part));
    request.on('end', () => {
      lastBody = Buffer.concat(parts).toString('utf8');
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.end(reply);
    });
  });
  server.keepAliveTimeout = 60_000;
  parentPort!.on('message', () => parentPort!.postMessage({ lastBody }));
  server.listen(0, '127.0.0.1', () =>
    parentPort!.postMessage({ port: (server.address() as AddressInfo).port }),
  );
}

if (!isMainThread && workerData?.role === 'fake-model') serveFakeModel();
else await compare();

async function compare(): Promise<void> {
  const trees = treesFrom(
    args,
    'model-request-ab <tree> <tree> [...] [--rounds 12] [--calls 500] [--turns 300]',
  );
  assertRuntimeBuilt();
  // A worker does not inherit tsx's loader, so a small JS bootstrap loads this file through tsx.
  const bootstrap = `import('tsx/esm/api').then(({ tsImport }) => tsImport(${JSON.stringify(import.meta.url)}, ${JSON.stringify(import.meta.url)}))`;
  const fakeServer = new Worker(bootstrap, { eval: true, workerData: { role: 'fake-model' } });
  const ask = () =>
    new Promise<{ port?: number; lastBody?: string }>((done) => fakeServer.once('message', done));
  const { port } = await ask();
  const baseURL = `http://127.0.0.1:${port}/v1`;

  // The request a served chat turn sends, after `capturedTurns` turns of one session.
  const served = await serveRuntime({
    token: 'bench-token',
    env: { AGENTD_MODEL: 'openai/fake-model', OPENAI_BASE_URL: baseURL },
  });
  const [client] = await connect({ port: served.port }, 1, 'model-request');
  for (let turn = 0; turn < capturedTurns; turn++)
    await new Promise<void>((done) => sendChatTurn(client!, () => done()));
  client!.ws.terminate();
  await served.stop();
  const answered = ask();
  fakeServer.postMessage('last body');
  const body = JSON.parse((await answered).lastBody!) as {
    messages: Array<{ role: 'system' | 'user' | 'assistant'; content: string }>;
    tools: Array<{ function: { name: string; description: string; parameters: Record<string, unknown> } }>;
  };
  const tools: readonly ModelToolDefinition[] = deepFreeze(
    body.tools.map(({ function: tool }) => ({
      name: tool.name,
      description: tool.description,
      inputSchema: tool.parameters,
    })),
  );
  const [system, ...rest] = body.messages;
  const history = rest.slice(0, -1).map((message) => deepFreeze({ ...message }) as ModelMessage);
  console.log(
    `request: ${history.length} messages of history, ${tools.length} tools, ${Buffer.byteLength(JSON.stringify(body))} bytes of JSON`,
  );

  const modules = await importFromTrees<typeof import('../src/model/index.js')>(trees, 'model/index.js');
  const contenders = modules.map((model, position) => ({
    tree: trees[position]!,
    model: model.createOpenAIModel({ model: 'fake-model', baseURL }),
    streamModel: model.streamModel,
  }));
  let sent = 0;
  const call = async (contender: (typeof contenders)[number]) => {
    const request: ModelRequest = {
      messages: [
        { role: 'system', content: system!.content },
        ...history,
        { role: 'user', content: `turn ${++sent}` },
      ],
      tools,
    };
    for await (const event of contender.streamModel(contender.model, request))
      if (event.type === 'error') throw new Error(`${contender.tree}: ${event.error.message}`);
  };
  for (const contender of contenders)
    for (let index = 0; index < 2 * callsPerRound; index++) await call(contender);

  const cpuUs = await interleavedRounds(contenders.length, rounds, async (position) => {
    const before = process.cpuUsage();
    for (let index = 0; index < callsPerRound; index++) await call(contenders[position]!);
    const used = process.cpuUsage(before);
    return (used.user + used.system) / callsPerRound;
  });
  console.log(`\n${rounds} rounds of ${callsPerRound} calls a tree; process CPU (both threads) µs a call\n`);
  printTreeTable(trees, cpuUs, 'µs a call', 0);
  await fakeServer.terminate();
  process.exit(0);
}
