// Model-layer overhead: agentd's streamModel(createOpenAIModel(...)) against iterating the official
// `openai` SDK stream directly, same fake server, same run, interleaved. The fake server runs in a worker
// thread so its writes do not compete with the client's event loop.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadavg } from 'node:os';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import OpenAI from 'openai';
import { streamModel } from '../src/model/call.js';
import { createOpenAIModel } from '../src/model/openai.js';
import type { ModelRequest } from '../src/model/spec.js';
import { openAIChunk, sseData } from '../test/helpers/fake-openai-server.js';

const chunkCount = 1000;
const throughputRuns = 150;
const latencyRuns = 30;
const warmupRuns = 5;
/** Gap between chunks in the latency test, long enough that chunks never queue up behind each other. */
const latencyGapMs = 0.15;

// --- the fake server (worker thread) ---------------------------------------------------------------------

function startFakeServer(): void {
  const tail = [
    sseData(openAIChunk({}, 'stop')),
    sseData({
      id: 'x',
      object: 'chat.completion.chunk',
      created: 0,
      model: 'bench',
      choices: [],
      usage: { prompt_tokens: 10, completion_tokens: chunkCount, total_tokens: chunkCount + 10 },
    }),
    sseData('[DONE]'),
  ];
  const head = sseData(openAIChunk({ role: 'assistant', content: '' }));
  const burstFrames = Array.from({ length: chunkCount }, (_, index) =>
    sseData(openAIChunk({ content: `token${index} ` })),
  );
  const pause = new Int32Array(new SharedArrayBuffer(4));
  const server = createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => {
      body += chunk;
    });
    request.on('end', async () => {
      const paced = body.includes('"paced"');
      response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      response.write(head);
      for (let index = 0; index < chunkCount; index++) {
        if (paced) {
          // Node corks a chunked response until the current tick ends, so yield a turn after each write
          // for the chunk to leave now, then wait so chunks never queue behind each other.
          // The content is the send time; the client subtracts it from the time the chunk reaches it.
          response.write(sseData(openAIChunk({ content: String(process.hrtime.bigint()) })));
          await new Promise((resolve) => setImmediate(resolve));
          Atomics.wait(pause, 0, 0, latencyGapMs);
        } else {
          response.write(burstFrames[index]!);
        }
      }
      for (const frame of tail) response.write(frame);
      response.end();
    });
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1', () => {
    parentPort!.postMessage({ port: (server.address() as AddressInfo).port });
  });
}

if (!isMainThread && workerData?.role === 'fake-openai-server') startFakeServer();

// --- the client (main thread) ----------------------------------------------------------------------------

function quantile(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const position = (sorted.length - 1) * q;
  const low = Math.floor(position);
  const high = Math.ceil(position);
  return sorted[low]! + (sorted[high]! - sorted[low]!) * (position - low);
}

const round = (value: number, digits = 2) => Number(value.toFixed(digits));

async function run() {
  // A worker does not inherit tsx's loader, so a small JS bootstrap loads this file through tsx.
  const bootstrap = `import('tsx/esm/api').then(({ tsImport }) => tsImport(${JSON.stringify(import.meta.url)}, ${JSON.stringify(import.meta.url)}))`;
  const worker = new Worker(bootstrap, { eval: true, workerData: { role: 'fake-openai-server' } });
  try {
    const port = await new Promise<number>((resolve, reject) => {
      worker.once('message', (message: { port: number }) => resolve(message.port));
      worker.once('error', reject);
    });
    const baseURL = `http://127.0.0.1:${port}/v1`;
    const sdk = new OpenAI({ apiKey: 'bench', baseURL, maxRetries: 0 });
    const model = createOpenAIModel({ model: 'bench', apiKey: 'bench', baseURL });
    const messages = (mode: string): ModelRequest['messages'] => [{ role: 'user', content: mode }];

    // Each consumer returns the number of text chunks it saw; `onText` sees each chunk's text as it arrives.
    const bare = async (mode: string, onText?: (text: string) => void): Promise<number> => {
      let count = 0;
      const stream = await sdk.chat.completions.create({
        model: 'bench',
        messages: messages(mode) as OpenAI.Chat.ChatCompletionMessageParam[],
        stream: true,
        stream_options: { include_usage: true },
      });
      for await (const chunk of stream) {
        const content = chunk.choices[0]?.delta?.content;
        if (content) {
          count++;
          onText?.(content);
        }
      }
      return count;
    };
    const agentd = async (mode: string, onText?: (text: string) => void): Promise<number> => {
      let count = 0;
      // A realistic call: with an abort signal and a timeout, as the engage loop makes it.
      const controller = new AbortController();
      for await (const event of streamModel(
        model,
        { messages: messages(mode) },
        { signal: controller.signal, timeoutMs: 60_000 },
      )) {
        if (event.type === 'text-delta') {
          count++;
          onText?.(event.text);
        } else if (event.type === 'error') {
          throw new Error(event.error.message);
        }
      }
      return count;
    };
    const contenders = { 'openai SDK (bare)': bare, 'agentd streamModel': agentd } as const;
    type Name = keyof typeof contenders;
    const names = Object.keys(contenders) as Name[];

    // (a) total time for the 1,000-chunk stream, ABBA-interleaved so neither side always goes first.
    for (let index = 0; index < warmupRuns; index++)
      for (const name of names) await contenders[name]('burst');
    const totals: Record<Name, number[]> = { 'openai SDK (bare)': [], 'agentd streamModel': [] };
    // CPU time of the process (both threads; the server's share is the same for both contenders). On a
    // loaded machine wall time also counts waiting for a core; CPU time does not.
    const cpuTotals: Record<Name, number[]> = { 'openai SDK (bare)': [], 'agentd streamModel': [] };
    for (let index = 0; index < throughputRuns; index++) {
      const order = index % 2 === 0 ? names : [...names].reverse();
      for (const name of order) {
        const cpuStart = process.cpuUsage();
        const started = performance.now();
        const count = await contenders[name]('burst');
        totals[name].push(performance.now() - started);
        const cpu = process.cpuUsage(cpuStart);
        cpuTotals[name].push((cpu.user + cpu.system) / 1000);
        if (count !== chunkCount) throw new Error(`${name} saw ${count} chunks, expected ${chunkCount}`);
      }
    }

    // (b) per-chunk latency: server write → normalized event in the caller's loop.
    const latencies: Record<Name, number[]> = { 'openai SDK (bare)': [], 'agentd streamModel': [] };
    for (let index = 0; index < latencyRuns; index++) {
      const order = index % 2 === 0 ? names : [...names].reverse();
      for (const name of order) {
        const samples = latencies[name];
        await contenders[name]('paced', (text) => {
          samples.push(Number(process.hrtime.bigint() - BigInt(text)) / 1000);
        });
      }
    }

    const rows: Array<Record<string, string | number>> = [];
    const bareName: Name = 'openai SDK (bare)';
    const summarize = (samples: Record<Name, number[]>, name: Name) => {
      const sorted = [...samples[name]].sort((left, right) => left - right);
      // Runs i of both contenders ran back to back, so their ratio cancels slow drift in machine load.
      const pairRatios = samples[name]
        .map((value, index) => value / samples[bareName][index]!)
        .sort((left, right) => left - right);
      return {
        median: quantile(sorted, 0.5),
        p90: quantile(sorted, 0.9),
        pairRatio: quantile(pairRatios, 0.5),
      };
    };
    const latencyStats = Object.fromEntries(
      names.map((name) => {
        const sorted = Float64Array.from(latencies[name]).sort();
        return [name, { median: quantile(sorted, 0.5), p90: quantile(sorted, 0.9) }];
      }),
    ) as Record<Name, { median: number; p90: number }>;
    const baseWall = summarize(totals, bareName);
    const baseCpu = summarize(cpuTotals, bareName);
    const baseLatency = latencyStats[bareName];
    for (const name of names) {
      const wall = summarize(totals, name);
      const cpu = summarize(cpuTotals, name);
      const latency = latencyStats[name];
      rows.push({
        contender: name,
        'wall median ms': round(wall.median),
        'wall p90 ms': round(wall.p90),
        'wall ratio': round(wall.median / baseWall.median, 3),
        'wall ratio (pairs)': round(wall.pairRatio, 3),
        'CPU median ms': round(cpu.median),
        'CPU p90 ms': round(cpu.p90),
        'CPU ratio': round(cpu.median / baseCpu.median, 3),
        'CPU ratio (pairs)': round(cpu.pairRatio, 3),
        'added overhead % (wall)': round((wall.median / baseWall.median - 1) * 100, 1),
        'added overhead % (CPU)': round((cpu.median / baseCpu.median - 1) * 100, 1),
        'chunk latency median µs': round(latency.median, 1),
        'chunk latency p90 µs': round(latency.p90, 1),
        'latency added µs': round(latency.median - baseLatency.median, 1),
        'latency ratio': round(latency.median / baseLatency.median, 3),
      });
    }
    return {
      rows,
      notes: [
        `Fake OpenAI Chat Completions server (real SSE wire format) on 127.0.0.1 in a worker thread; each stream has ${chunkCount} content chunks plus finish, usage and [DONE].`,
        `Total time: ${throughputRuns} interleaved runs per contender (ABBA order) after ${warmupRuns} warm-up runs each; the server writes every chunk as fast as the socket takes it.`,
        `Latency: ${latencyRuns} interleaved runs per contender, ${chunkCount} chunks each; the server stamps process.hrtime into each chunk and waits ${latencyGapMs} ms between chunks; latency = time the text reaches the caller's loop − stamp.`,
        "The agentd path is createOpenAIModel + streamModel with an AbortSignal and a timeout, the way the engage loop calls it: the SDK sends the request and agentd reads the event stream (docs/decisions/0044-openai-event-stream-read-by-agentd.md); the bare path iterates the SDK's own stream and reads delta.content.",
        'wall = elapsed time of the whole stream; CPU = process CPU time (user + system, both threads) during it. ratio = agentd median / bare median; (pairs) = median over back-to-back runs of agentd/bare. added overhead % = (ratio − 1) × 100; target under 5%.',
        `The machine is shared (2 cores, other jobs running; load average ${loadavg()[0]!.toFixed(1)} at the end of this run): wall figures include time spent waiting for a core and move by several percent between runs; CPU time is the steadier measure of the work each path does.`,
      ],
    };
  } finally {
    await worker.terminate();
  }
}

export default {
  name: 'model-overhead',
  description:
    'agentd model layer (streamModel over the openai provider) vs the bare openai SDK on a 1,000-chunk stream',
  run,
};
