// What a chat turn leaves to V8's garbage collector: the whole runtime on SQLite of each tree named (the
// current one by default) serves one closed-loop client from a process of its own, with V8's collector
// tracing on (`--trace-gc-nvp`, `--trace-gc-verbose`, read from the server's standard output). Over a window
// after the warm-up (which passes the first memory maintenance, 30 s after start) it reports, a turn: the
// bytes scavenges promoted, how much the old generation grew between full collections (promotions and what
// V8 allocates there directly, such as the new hash table of a long-lived Map rebuilt after its deletions),
// scavenges and full collections per 10,000 turns, and the collector's time on the main thread and on its
// helper threads. Full collections come every few seconds, so a window of 30 s or more is needed to count
// them. With --sites N a second, shorter window runs V8's sampling heap profiler, keeping the objects that a
// full collection freed and those still held at its end, and lists the N allocation sites (the innermost
// agentd frames and the function that allocated) that left the most bytes a turn: what the old generation
// is fed by; with --every-allocation, every byte the window allocated (what scavenges freed too), by site and
// by agentd file, with the total. The profiler slows the server, so that window's turns are not the first's.
// --v8-flags "<flags>" sets more V8 flags in the servers (e.g. --no-parallel-scavenge), for an experiment.
// A diagnostic, not a benchmark module (`npm run bench` does not run it):
//   npm run build && npx tsx bench/chat-turn-gc.ts [tree ...] [--warmup-ms 40000] [--measure-ms 30000]
//     [--sites 20] [--sites-ms 3000] [--every-allocation] [--v8-flags "<flags>"]
// An older tree must have this tree's bench/chat-turn.bench.ts and chat-turn-driver.ts (AGENTD_BENCH_V8_FLAGS).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { takeFlag } from './args.js';
import { closedLoop, connect, startTarget, type Target, warmUp } from './chat-turn-driver.js';
import { assertRuntimeBuilt } from './runtime-server.js';

const args = process.argv.slice(2);
const warmupMs = Number(takeFlag(args, '--warmup-ms') ?? 40_000);
const measureMs = Number(takeFlag(args, '--measure-ms') ?? 30_000);
const siteCount = Number(takeFlag(args, '--sites') ?? 0);
const sitesMs = Number(takeFlag(args, '--sites-ms') ?? 3000);
const extraV8Flags = takeFlag(args, '--v8-flags') ?? '';
const everyAllocation = args.includes('--every-allocation');
if (everyAllocation) args.splice(args.indexOf('--every-allocation'), 1);
const trees = (args.length > 0 ? args : ['.']).map((tree) => resolve(tree));
if (trees.includes(resolve('.'))) assertRuntimeBuilt();

interface CollectorWindow {
  turns: number;
  cpuUs: number;
  scavenges: number;
  fullCollections: number;
  promotedBytes: number;
  oldGrowthBytes: number;
  mainThreadMs: number;
  helperThreadsMs: number;
}

/**
 * Reads the server's collector trace as it comes and adds up what the window (while `counting`) saw. A
 * `--trace-gc-nvp` line (`name=value` pairs) comes first for each collection, then `--trace-gc-verbose`'s
 * space figures; the old space's size after a scavenge less its size after the collection before is what
 * that interval added to it.
 */
function collectorTrace(stdout: NodeJS.ReadableStream) {
  const window: CollectorWindow = {
    turns: 0,
    cpuUs: 0,
    scavenges: 0,
    fullCollections: 0,
    promotedBytes: 0,
    oldGrowthBytes: 0,
    mainThreadMs: 0,
    helperThreadsMs: 0,
  };
  let counting = false;
  let lastKind: string | undefined;
  let oldUsedKb: number | undefined;
  createInterface({ input: stdout }).on('line', (line) => {
    if (line.includes(' gc=')) {
      const fields = new Map<string, number | string>();
      for (const pair of line.split(/\s+/)) {
        const at = pair.indexOf('=');
        if (at > 0) fields.set(pair.slice(0, at), pair.slice(at + 1));
      }
      const number = (name: string) => Number(fields.get(name) ?? 0) || 0;
      lastKind = String(fields.get('gc'));
      if (!counting) return;
      window.mainThreadMs += number('pause');
      let helpers = 0;
      for (const [name, value] of fields) if (name.startsWith('background.')) helpers += Number(value) || 0;
      window.helperThreadsMs += helpers;
      if (lastKind === 's') {
        window.scavenges++;
        window.promotedBytes += number('promoted');
      } else if (lastKind === 'mc') {
        window.fullCollections++;
        window.mainThreadMs += number('incremental');
      }
      return;
    }
    const oldSpace = /\] Old space,\s+used:\s+(\d+) KB/.exec(line);
    if (!oldSpace) return;
    const usedKb = Number(oldSpace[1]);
    if (counting && lastKind === 's' && oldUsedKb !== undefined)
      window.oldGrowthBytes += (usedKb - oldUsedKb) * 1024;
    oldUsedKb = usedKb;
  });
  return {
    window,
    count(on: boolean) {
      counting = on;
    },
  };
}

interface ProfileNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: ProfileNode[];
}

/** Bytes a turn by allocation site: the two innermost agentd frames, then the function that allocated. */
function bytesBySite(profileFile: string, turns: number): Array<[string, number]> {
  const { head } = JSON.parse(readFileSync(profileFile, 'utf8')) as { head: ProfileNode };
  const name = (frame: ProfileNode['callFrame']) =>
    `${frame.functionName || '(anonymous)'} ${frame.url.replace(/^.*\/(dist|node_modules)\//, '$1/')}:${frame.lineNumber + 1}`;
  const bySite = new Map<string, number>();
  const visit = (node: ProfileNode, agentdFrames: string[]) => {
    const frames = node.callFrame.url.includes('/dist/')
      ? [...agentdFrames, name(node.callFrame)]
      : agentdFrames;
    if (node.selfSize > 0) {
      const site = `${frames.slice(-2).join(' ← ') || '(no agentd frame)'} ⇒ ${name(node.callFrame)}`;
      bySite.set(site, (bySite.get(site) ?? 0) + node.selfSize);
    }
    for (const child of node.children) visit(child, frames);
  };
  visit(head, []);
  return [...bySite]
    .map(([site, bytes]): [string, number] => [site, bytes / turns])
    .sort((a, b) => b[1] - a[1]);
}

/** Bytes a turn by the file of the innermost agentd frame ("(no agentd frame)" for the rest). */
function bytesByFile(sites: Array<[string, number]>): Array<[string, number]> {
  const byFile = new Map<string, number>();
  for (const [site, bytes] of sites) {
    const innermost = site.split(' ⇒ ')[0]!.split(' ← ').at(-1)!;
    const file = /(dist\/[^:]+):/.exec(innermost)?.[1] ?? '(no agentd frame)';
    byFile.set(file, (byFile.get(file) ?? 0) + bytes);
  }
  return [...byFile].sort((a, b) => b[1] - a[1]);
}

async function measure(tree: string, scratch: string) {
  const target: Target = await startTarget({
    moduleUrl: pathToFileURL(join(tree, 'bench', 'chat-turn.bench.ts')).href,
    role: 'sqlite',
    name: tree,
    env: {
      AGENTD_BENCH_V8_FLAGS: `--trace-gc-nvp --trace-gc-verbose ${extraV8Flags}`.trim(),
      ...(everyAllocation ? { AGENTD_BENCH_HEAP_ALL: '1' } : {}),
    },
    stdout: 'pipe',
  });
  try {
    const trace = collectorTrace(target.stdout!);
    const started = performance.now();
    await warmUp(target, Math.min(12_000, warmupMs));
    const [client] = await connect(target, 1, 'gc');
    await closedLoop([client!], Math.max(0, warmupMs - (performance.now() - started)));
    const cpuBefore = await target.cpu();
    trace.count(true);
    const { latencies } = await closedLoop([client!], measureMs);
    trace.count(false);
    trace.window.cpuUs = (await target.cpu()) - cpuBefore;
    trace.window.turns = latencies.length;
    let sites: Array<[string, number]> = [];
    if (siteCount > 0) {
      const file = join(scratch, `${trees.indexOf(tree)}.heapprofile`);
      const stop = await target.sampleHeap(file);
      const sampled = await closedLoop([client!], sitesMs);
      await stop();
      sites = bytesBySite(file, sampled.latencies.length);
    }
    client!.ws.terminate();
    return { window: { ...trace.window }, sites };
  } finally {
    await target.stop();
  }
}

const scratch = mkdtempSync(join(tmpdir(), 'agentd-chat-turn-gc-'));
try {
  const results = [];
  for (const tree of trees) results.push({ tree, ...(await measure(tree, scratch)) });
  const perTurn = (value: number, turns: number, digits = 1) => (value / turns).toFixed(digits);
  const rows: Array<[string, (window: CollectorWindow) => string]> = [
    ['turns in the window', (w) => String(w.turns)],
    ['server CPU a turn, µs', (w) => perTurn(w.cpuUs, w.turns, 0)],
    ['promoted by scavenges, KB a turn', (w) => perTurn(w.promotedBytes / 1024, w.turns, 2)],
    [
      'old generation grown between full collections, KB a turn',
      (w) => perTurn(w.oldGrowthBytes / 1024, w.turns, 2),
    ],
    ['scavenges per 10,000 turns', (w) => perTurn(w.scavenges * 10_000, w.turns, 0)],
    ['full collections per 10,000 turns', (w) => perTurn(w.fullCollections * 10_000, w.turns, 2)],
    ['collector on the main thread, µs a turn', (w) => perTurn(w.mainThreadMs * 1000, w.turns)],
    ['collector on helper threads, µs a turn', (w) => perTurn(w.helperThreadsMs * 1000, w.turns)],
  ];
  console.log(`1 client, ${measureMs} ms measured after ${warmupMs} ms of warm-up\n`);
  console.log(`| measured | ${results.map((result) => result.tree).join(' | ')} |`);
  console.log(`| --- | ${results.map(() => '---:').join(' | ')} |`);
  for (const [label, cell] of rows)
    console.log(`| ${label} | ${results.map((result) => cell(result.window)).join(' | ')} |`);
  for (const result of results) {
    if (result.sites.length === 0) continue;
    console.log(
      `\n${result.tree}: allocation sites by bytes a turn ${everyAllocation ? 'allocated' : 'freed by full collections or still held'}\n`,
    );
    console.log('| B a turn | site (agentd frames ⇒ allocating function) |\n| ---: | --- |');
    for (const [site, bytes] of result.sites.slice(0, siteCount))
      console.log(`| ${bytes.toFixed(0)} | ${site.replaceAll('|', '\\|')} |`);
    const total = result.sites.reduce((sum, [, bytes]) => sum + bytes, 0);
    console.log(
      `\n${result.tree}: the same by the file of the innermost agentd frame (all sites: ${(total / 1024).toFixed(1)} KB a turn)\n`,
    );
    console.log('| B a turn | file |\n| ---: | --- |');
    for (const [file, bytes] of bytesByFile(result.sites).slice(0, siteCount))
      console.log(`| ${bytes.toFixed(0)} | ${file} |`);
  }
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
