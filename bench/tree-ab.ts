// What the A/Bs between builds of agentd share (in process: bench/model-request-ab.ts, bench/local-model-ab.ts;
// a process per tree and round: bench/workflow-durable-ab.ts, bench/work-submit-ab.ts):
// the trees named on the command line, a module from each tree's dist/, rounds that alternate between them with
// the order reversed every other round, and the table of each tree's figures against the first tree's. A tree
// may be named twice, to see the method's own noise, so everything is kept by position.
import { execFileSync } from 'node:child_process';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { takeFlag } from './args.js';
import { median } from './stats.js';

/**
 * The trees named in `args` (resolved), for A/Bs that run every tree in one process (so no tree can have
 * variables of its own), or the usage and exit 2 when fewer than two are named.
 */
export function treesFrom(args: string[], usage: string): string[] {
  const specs = treeSpecsFrom(args, usage);
  if (specs.some((spec) => Object.keys(spec.env).length > 0)) {
    console.error(`usage: ${usage} (one process runs every tree: no KEY=VALUE@<tree>)`);
    process.exit(2);
  }
  return specs.map((spec) => spec.dir);
}

/** The trees named in `args` as `treeSpecOf` reads them, or the usage and exit 2 when fewer than two are named. */
export function treeSpecsFrom(args: string[], usage: string): TreeSpec[] {
  if (args.length < 2) {
    console.error(`usage: ${usage}`);
    process.exit(2);
  }
  return args.map(treeSpecOf);
}

/**
 * A tree as the A/Bs that start processes take it: `<dir>`, or `KEY=VALUE,…@<dir>` for its processes to run
 * with those variables set (one build against itself with a setting changed: `AGENTD_SQLITE_WAL_BATCH=0@. .`).
 */
export interface TreeSpec {
  dir: string;
  env: Record<string, string>;
  label: string;
}

export function treeSpecOf(arg: string): TreeSpec {
  const at = arg.lastIndexOf('@');
  const dir = resolve(arg.slice(at + 1));
  const pairs = at === -1 ? [] : arg.slice(0, at).split(',');
  const env = Object.fromEntries(
    pairs.map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]),
  );
  return { dir, env, label: at === -1 ? dir : `${arg.slice(0, at)}@${dir}` };
}

/** `path` (under dist/) of each tree, in the order named. */
export function importFromTrees<Module>(trees: string[], path: string): Promise<Module[]> {
  return Promise.all(
    trees.map(async (tree) => (await import(pathToFileURL(`${tree}/dist/${path}`).href)) as Module),
  );
}

/** `rounds` rounds of `measure(position)` for each position, the order reversed every other round. */
export async function interleavedRounds(
  positions: number,
  rounds: number,
  measure: (position: number) => Promise<number>,
): Promise<number[][]> {
  const figures = Array.from({ length: positions }, (): number[] => []);
  const order = [...figures.keys()];
  for (let round = 0; round < rounds; round++)
    for (const position of round % 2 === 0 ? order : [...order].reverse())
      figures[position]!.push(await measure(position));
  return figures;
}

/** Each tree's median, least and most over the rounds, and the median of its rounds' ratios to the first tree's. */
export function printTreeTable(trees: string[], figures: number[][], unit: string, digits: number): void {
  console.log(`| tree | median ${unit} | rounds: least–most | ÷ the first tree, median of the rounds |`);
  console.log('| --- | ---: | ---: | ---: |');
  for (const [position, tree] of trees.entries()) {
    const own = figures[position]!;
    const ratios = own.map((value, round) => value / figures[0]![round]!);
    console.log(
      `| ${tree} | ${median(own).toFixed(digits)} | ${Math.min(...own).toFixed(digits)}–${Math.max(...own).toFixed(digits)} | ×${median(ratios).toFixed(3)} |`,
    );
  }
}

/** Wall and CPU time of one unit of work, in µs. */
export interface UnitCost {
  wallUs: number;
  cpuUs: number;
}

/**
 * In a child process of `childProcessRounds`: `warmUp`, then the medians over `batches` batches of `perBatch`
 * calls of `unit`, printed as the JSON line the parent reads.
 */
export async function printBatchMedians(
  unit: () => Promise<unknown>,
  options: { warmUp: () => Promise<void>; batches: number; perBatch: number },
): Promise<void> {
  await options.warmUp();
  const costs: UnitCost[] = [];
  for (let index = 0; index < options.batches; index++) costs.push(await timeBatch(unit, options.perBatch));
  console.log(
    JSON.stringify({
      wallUs: median(costs.map((one) => one.wallUs)),
      cpuUs: median(costs.map((one) => one.cpuUs)),
    }),
  );
}

/** `count` calls of `unit` one after another: wall and CPU µs a call. */
export async function timeBatch(unit: () => Promise<unknown>, count: number): Promise<UnitCost> {
  const startedAt = performance.now();
  const cpu = process.cpuUsage();
  for (let index = 0; index < count; index++) await unit();
  const used = process.cpuUsage(cpu);
  return {
    wallUs: ((performance.now() - startedAt) * 1000) / count,
    cpuUs: (used.user + used.system) / count,
  };
}

/**
 * Interleaved rounds of a process per tree and round, each running `script --child <tree>` (which ends with
 * `printBatchMedians`' line), then the tables of wall and CPU time by tree.
 */
export async function childProcessRounds(
  script: string,
  trees: TreeSpec[],
  rounds: number,
  titles: { wall: string; cpu: string; unit: string },
): Promise<void> {
  const cpu: number[][] = trees.map(() => []);
  const wall = await interleavedRounds(trees.length, rounds, async (position) => {
    const { dir, env } = trees[position]!;
    const output = execFileSync(process.execPath, ['--import', 'tsx', script, '--child', dir], {
      encoding: 'utf8',
      env: { ...process.env, ...env },
    });
    const figures = JSON.parse(output.trim().split('\n').at(-1)!) as UnitCost;
    cpu[position]!.push(figures.cpuUs);
    return figures.wallUs;
  });
  const labels = trees.map((tree) => tree.label);
  console.log(`${titles.wall}\n`);
  printTreeTable(labels, wall, titles.unit, 1);
  console.log(`\n${titles.cpu}\n`);
  printTreeTable(labels, cpu, titles.unit, 1);
}

/**
 * The main of a process-per-tree A/B script: as a child (`--child <tree>`), `measure(tree)`; else the
 * rounds over the trees named on the command line (`--rounds`, default `defaultRounds`).
 */
export async function runChildProcessAB(options: {
  script: string;
  usage: string;
  defaultRounds: number;
  measure: (tree: string) => Promise<void>;
  titles: { wall: string; cpu: string; unit: string };
}): Promise<void> {
  const args = process.argv.slice(2);
  const child = takeFlag(args, '--child');
  if (child) {
    await options.measure(child);
    return;
  }
  const rounds = Number(takeFlag(args, '--rounds') ?? options.defaultRounds);
  await childProcessRounds(options.script, treeSpecsFrom(args, options.usage), rounds, options.titles);
}
