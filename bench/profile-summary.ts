// Summarizes a V8 CPU profile (`node --cpu-prof`) as Markdown: the functions with the most self time, and
// self time gathered by where the code lives (agentd's folders, each dependency, Node internals, native).
// Usage: npx tsx bench/profile-summary.ts <file.cpuprofile> [title] [--top N] [--turns N]
// With --turns, self time is also shown per chat turn (µs/turn) so profiles of runs of different lengths
// compare directly.
import { readFileSync } from 'node:fs';
import { takeFlag } from './args.js';
import { type CpuProfile, profileTree } from './cpu-profile.js';

const args = process.argv.slice(2);
const flag = (name: string) => takeFlag(args, name);
const top = Number(flag('--top') ?? 30);
const turns = flag('--turns');
const [file, title] = args;
if (!file) {
  console.error('usage: profile-summary <file.cpuprofile> [title] [--top N] [--turns N]');
  process.exit(2);
}

const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
const { byId, parentOf, frameName } = profileTree(profile);
const selfUs = new Map<number, number>();
profile.samples.forEach((id, index) => {
  selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[index] ?? 0));
});

/** Where a frame's code lives: an agentd folder, a package, Node itself, or V8/native work. */
function placeOf(url: string, name: string): string {
  if (!url) {
    if (name === '(idle)' || name === '(program)' || name === '(garbage collector)') return name;
    return '(native)';
  }
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1]!;
  if (url.startsWith('node:')) return 'node internals';
  const own = /\/(src|bench|dist)\/(.+)$/.exec(url);
  if (own) {
    const parts = own[2]!.split('/');
    return `agentd ${own[1]}/${parts.length > 1 ? parts[0] : parts[0]!.replace(/\.[jt]s$/, '')}`;
  }
  return url;
}

const socketWrites = new Set([
  'writev',
  'writeBuffer',
  'writeUtf8String',
  'writeLatin1String',
  'writeAsciiString',
]);

/**
 * What a turn cannot do without (SQLite's own work, socket system calls, JSON) against the rest: native
 * frames have no URL, so they are told apart by name and by who called them.
 */
function floorPartOf(id: number, url: string, name: string): string {
  if (name === '(garbage collector)') return 'garbage collection';
  if (name === '(idle)') return name;
  if (url || name === '(program)') return 'JavaScript and the rest';
  const caller = byId.get(parentOf.get(id) ?? -1)?.callFrame.url ?? '';
  // better-sqlite3's statement methods are native and called straight from the store.
  if (caller.includes('better-sqlite3') || /\/(src|dist)\/store\//.test(caller))
    return 'SQLite (statements, commits; native)';
  if (caller.startsWith('node:inspector')) return 'the profiler itself';
  if (socketWrites.has(name)) return 'socket writes (system calls)';
  if (name === 'stringify' || name === 'parse') return 'JSON';
  return 'other native';
}

const functions = new Map<string, number>();
const places = new Map<string, number>();
const floorParts = new Map<string, number>();
let totalUs = 0;
let busyUs = 0;
for (const [id, us] of selfUs) {
  const node = byId.get(id)!;
  const { functionName, url } = node.callFrame;
  const name = functionName || '(anonymous)';
  const key = frameName(id);
  functions.set(key, (functions.get(key) ?? 0) + us);
  const place = placeOf(url, name);
  places.set(place, (places.get(place) ?? 0) + us);
  const part = floorPartOf(id, url, name);
  floorParts.set(part, (floorParts.get(part) ?? 0) + us);
  totalUs += us;
  if (name !== '(idle)') busyUs += us;
}

const perTurn = turns ? Number(turns) : undefined;
const cells = (us: number) => {
  const row = [`${(us / 1000).toFixed(1)}`, `${((us / busyUs) * 100).toFixed(1)}%`];
  if (perTurn) row.push((us / perTurn).toFixed(1));
  return row;
};
const header = (first: string) =>
  perTurn
    ? [`| ${first} | self ms | % of busy | µs/turn |`, '| --- | ---: | ---: | ---: |']
    : [`| ${first} | self ms | % of busy |`, '| --- | ---: | ---: |'];
const rowsOf = (map: Map<string, number>, limit: number) =>
  [...map.entries()]
    .filter(([key]) => key !== '(idle)')
    .sort((left, right) => right[1] - left[1])
    .slice(0, limit)
    .map(([key, us]) => `| ${key.replace(/\|/g, '\\|')} | ${cells(us).join(' | ')} |`);

const lines = [
  `## ${title ?? file}`,
  '',
  `Profile ${(totalUs / 1000).toFixed(0)} ms long, ${(busyUs / 1000).toFixed(0)} ms busy (not idle)${perTurn ? `, ${perTurn} turns: ${(busyUs / perTurn).toFixed(0)} µs busy per turn` : ''}.`,
  '',
  '### The floor and the rest',
  '',
  ...header('part'),
  ...rowsOf(floorParts, 10),
  '',
  '### Self time by place',
  '',
  ...header('place'),
  ...rowsOf(places, 25),
  '',
  `### Top ${top} functions by self time`,
  '',
  ...header('function'),
  ...rowsOf(functions, top),
  '',
];
console.log(lines.join('\n'));
