// The benchmark harness: `npm run bench [names…]`. Discovers bench/*.bench.ts, runs the selected ones one
// after another, prints a table for each and writes bench/results/<name>.json and <name>.md.
// The contract a benchmark module follows is in bench/README.md.
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { arch, cpus, platform, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

type Cell = string | number;
type Row = Record<string, Cell>;

interface BenchResult {
  rows: Row[];
  notes?: string[];
}

interface Benchmark {
  name: string;
  description?: string;
  run(): Promise<BenchResult>;
}

const benchDir = dirname(fileURLToPath(import.meta.url));
const resultsDir = join(benchDir, 'results');

function isBenchmark(value: unknown): value is Benchmark {
  const candidate = value as Partial<Benchmark> | undefined;
  return typeof candidate?.name === 'string' && typeof candidate.run === 'function';
}

async function discover(): Promise<Array<{ file: string; bench: Benchmark }>> {
  const files = readdirSync(benchDir)
    .filter((file) => file.endsWith('.bench.ts'))
    .sort();
  const found: Array<{ file: string; bench: Benchmark }> = [];
  for (const file of files) {
    const module = (await import(pathToFileURL(join(benchDir, file)).href)) as { default?: unknown };
    if (!isBenchmark(module.default)) {
      throw new Error(
        `bench/${file} must \`export default { name, description, run }\` (see bench/README.md).`,
      );
    }
    found.push({ file, bench: module.default });
  }
  return found;
}

function columnsOf(rows: Row[]): string[] {
  const columns: string[] = [];
  for (const row of rows) for (const key of Object.keys(row)) if (!columns.includes(key)) columns.push(key);
  return columns;
}

function cellText(value: Cell | undefined): string {
  if (value === undefined) return '';
  return typeof value === 'number' ? String(value) : value;
}

function textTable(rows: Row[]): string {
  const columns = columnsOf(rows);
  const widths = columns.map((column) =>
    Math.max(column.length, ...rows.map((row) => cellText(row[column]).length)),
  );
  const line = (cells: string[]) =>
    cells
      .map((cell, index) => (index === 0 ? cell.padEnd(widths[index]!) : cell.padStart(widths[index]!)))
      .join('  ');
  return [
    line(columns),
    widths.map((width) => '-'.repeat(width)).join('  '),
    ...rows.map((row) => line(columns.map((column) => cellText(row[column])))),
  ].join('\n');
}

function markdownTable(rows: Row[]): string {
  const columns = columnsOf(rows);
  const escapeCell = (text: string) => text.replace(/\|/g, '\\|');
  return [
    `| ${columns.map(escapeCell).join(' | ')} |`,
    `| ${columns.map((_, index) => (index === 0 ? '---' : '---:')).join(' | ')} |`,
    ...rows.map((row) => `| ${columns.map((column) => escapeCell(cellText(row[column]))).join(' | ')} |`),
  ].join('\n');
}

function environment() {
  const cpuList = cpus();
  return {
    node: process.version,
    platform: `${platform()} ${arch()}`,
    cpu: cpuList[0]?.model.trim() ?? 'unknown',
    cpuCount: cpuList.length,
    memoryGiB: Math.round(totalmem() / 2 ** 30),
  };
}

async function main(): Promise<number> {
  const wanted = process.argv.slice(2).filter((arg) => !arg.startsWith('-'));
  const all = await discover();
  if (process.argv.includes('--list')) {
    for (const { bench, file } of all)
      console.log(`${bench.name.padEnd(24)} bench/${file}  ${bench.description ?? ''}`);
    return 0;
  }
  const selected = wanted.length
    ? all.filter(
        ({ bench, file }) => wanted.includes(bench.name) || wanted.includes(file.replace(/\.bench\.ts$/, '')),
      )
    : all;
  const unknown = wanted.filter(
    (name) => !all.some(({ bench, file }) => bench.name === name || file === `${name}.bench.ts`),
  );
  if (unknown.length) {
    console.error(
      `Unknown benchmark(s): ${unknown.join(', ')}. Available: ${all.map(({ bench }) => bench.name).join(', ')}`,
    );
    return 2;
  }
  mkdirSync(resultsDir, { recursive: true });
  let failures = 0;
  for (const { bench, file } of selected) {
    console.log(`\n== ${bench.name} (bench/${file})${bench.description ? `: ${bench.description}` : ''}`);
    const started = performance.now();
    let result: BenchResult;
    try {
      result = await bench.run();
    } catch (error) {
      failures++;
      console.error(`   failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
      continue;
    }
    const durationMs = Math.round(performance.now() - started);
    const env = environment();
    const date = new Date().toISOString();
    console.log(textTable(result.rows));
    for (const note of result.notes ?? []) console.log(`  * ${note}`);
    console.log(`  (${durationMs} ms)`);
    const record = {
      name: bench.name,
      description: bench.description ?? '',
      date,
      durationMs,
      ...env,
      rows: result.rows,
      notes: result.notes ?? [],
    };
    writeFileSync(join(resultsDir, `${bench.name}.json`), `${JSON.stringify(record, null, 2)}\n`);
    const markdown = [
      `# Benchmark: ${bench.name}`,
      '',
      bench.description ?? '',
      '',
      markdownTable(result.rows),
      '',
      ...(result.notes ?? []).map((note) => `- ${note}`),
      '',
      `Node ${env.node}, ${env.platform}, ${env.cpu} × ${env.cpuCount}, ${env.memoryGiB} GiB; ${date}; took ${durationMs} ms.`,
      '',
    ].join('\n');
    writeFileSync(join(resultsDir, `${bench.name}.md`), markdown);
  }
  return failures ? 1 : 0;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  },
);
