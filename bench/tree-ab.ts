// What the in-process A/Bs between builds of agentd share (bench/model-request-ab.ts, bench/local-model-ab.ts):
// the trees named on the command line, a module from each tree's dist/, rounds that alternate between them with
// the order reversed every other round, and the table of each tree's figures against the first tree's. A tree
// may be named twice, to see the method's own noise, so everything is kept by position.
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { median } from './stats.js';

/** The trees named in `args` (resolved), or the usage and exit 2 when fewer than two are named. */
export function treesFrom(args: string[], usage: string): string[] {
  const trees = args.map((tree) => resolve(tree));
  if (trees.length < 2) {
    console.error(`usage: ${usage}`);
    process.exit(2);
  }
  return trees;
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
