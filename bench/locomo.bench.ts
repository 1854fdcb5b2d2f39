// Memory quality on LoCoMo (10 long conversations, 1,986 questions with evidence turn ids; CC BY-NC 4.0,
// evaluation use only): each conversation is ingested through the memory API, then every question is
// answered by memory.search and scored by recall@5/@10 of its evidence turns, next to a plain BM25
// baseline (minisearch) over the same turn texts in the same run. No model, fully offline.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import MiniSearch from 'minisearch';
import { createBus } from '../src/bus/index.js';
import {
  createHashingEmbedder,
  createMemoryService,
  type MemoryService,
  memoryConfigSchema,
} from '../src/memory/index.js';
import {
  createPostgresDatabase,
  createSqliteDatabase,
  migrate,
  type SqlDatabase,
} from '../src/store/index.js';
import { freshPostgresSchema } from './postgres-schema.js';

/** Automatic recall's row budget and candidates, as configured by default. */
const { promptMaxScoredRows, promptCandidates } = memoryConfigSchema.parse({}).recall;
const dataDir = process.env.AGENTD_LOCOMO_DIR ?? '/work/shared/bench-data/locomo10';
// Set to a Postgres URL to measure on Postgres (a fresh schema, dropped afterwards) instead of SQLite.
const postgresUrl = process.env.AGENTD_BENCH_LOCOMO_PG_URL;

async function openDatabase(): Promise<{ db: SqlDatabase; drop: () => Promise<void> }> {
  if (!postgresUrl) return { db: createSqliteDatabase({ path: ':memory:' }), drop: async () => {} };
  const schema = await freshPostgresSchema(postgresUrl, 'agentd_bench_locomo');
  if (!schema) throw new Error(`AGENTD_BENCH_LOCOMO_PG_URL: ${postgresUrl} did not answer`);
  const db = createPostgresDatabase({
    connectionString: postgresUrl,
    schema: schema.name,
    poolSize: 4,
    settings: { synchronous_commit: 'off' },
  });
  return { db, drop: schema.drop };
}

interface Turn {
  speaker: string;
  dia_id: string;
  text: string;
  blip_caption?: string;
}

interface Question {
  question: string;
  evidence?: string[];
  category: number;
}

const monthIndex: Record<string, number> = {
  january: 0,
  february: 1,
  march: 2,
  april: 3,
  may: 4,
  june: 5,
  july: 6,
  august: 7,
  september: 8,
  october: 9,
  november: 10,
  december: 11,
};

/** "1:56 pm on 8 May, 2023" → epoch ms (UTC), or undefined. */
function parseSessionTime(text: unknown): number | undefined {
  const match = /(\d{1,2}):(\d{2})\s*(am|pm)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})/i.exec(
    String(text ?? ''),
  );
  if (!match) return undefined;
  const month = monthIndex[match[5]!.toLowerCase()];
  if (month === undefined) return undefined;
  const hour = (Number(match[1]) % 12) + (match[3]!.toLowerCase() === 'pm' ? 12 : 0);
  return Date.UTC(Number(match[6]), month, Number(match[4]), hour, Number(match[2]));
}

/** The dataset writes evidence as "D1:3", sometimes several in one string or with stray punctuation. */
function evidenceIds(evidence: string[] | undefined): string[] {
  const ids = new Set<string>();
  for (const item of evidence ?? [])
    for (const match of item.matchAll(/D:?(\d+):(\d+)/g)) ids.add(`D${match[1]}:${match[2]}`);
  return [...ids];
}

function turnText(turn: Turn): string {
  return turn.blip_caption
    ? `${turn.speaker}: ${turn.text} [shares ${turn.blip_caption}]`
    : `${turn.speaker}: ${turn.text}`;
}

interface Scores {
  at5: number;
  at10: number;
  questions: number;
}

type Bucket = 'all' | 'answerable' | 'tuning' | 'heldOut';

function emptyResult(): Record<Bucket, Scores> {
  const empty = () => ({ at5: 0, at10: 0, questions: 0 });
  return { all: empty(), answerable: empty(), tuning: empty(), heldOut: empty() };
}

function score(scores: Scores, ranked: string[], evidence: string[]) {
  const top5 = new Set(ranked.slice(0, 5));
  const top10 = new Set(ranked.slice(0, 10));
  scores.at5 += evidence.filter((id) => top5.has(id)).length / evidence.length;
  scores.at10 += evidence.filter((id) => top10.has(id)).length / evidence.length;
  scores.questions++;
}

async function ingest(
  memory: MemoryService,
  agentId: string,
  data: Record<string, unknown>,
): Promise<Map<number, string>> {
  const ref = { sessionId: `${agentId}-1`, sessionKey: `agent:${agentId}:main`, agentId };
  const speakerA = String(data.speaker_a);
  const byMemoryId = new Map<number, string>();
  const sessionNumbers = Object.keys(data)
    .map((key) => /^session_(\d+)$/.exec(key)?.[1])
    .filter((number): number is string => number !== undefined)
    .map(Number)
    .sort((left, right) => left - right);
  for (const number of sessionNumbers) {
    const turns = data[`session_${number}`] as Turn[];
    const startMs = parseSessionTime(data[`session_${number}_date_time`]);
    const entries = await memory.appendBatch(
      ref,
      turns.map((turn, index) => ({
        role: turn.speaker === speakerA ? ('user' as const) : ('assistant' as const),
        content: turnText(turn),
        metadata: { diaId: turn.dia_id },
        ...(startMs !== undefined ? { createdAtMs: startMs + index * 1000 } : {}),
      })),
    );
    for (const [index, entry] of entries.entries()) byMemoryId.set(entry.memoryId, turns[index]!.dia_id);
  }
  return byMemoryId;
}

async function run() {
  const files = readdirSync(dataDir)
    .filter((file) => file.endsWith('.json'))
    .sort();
  const { db, drop } = await openDatabase();
  await migrate(db);
  // Default memory limits: the RAM context keeps 64 entries; everything older is evicted to LTM and must
  // be found there.
  const memory = createMemoryService({
    db,
    bus: createBus(),
    embedder: createHashingEmbedder({ dimensions: 256 }),
  });
  // Automatic recall as a chat turn runs it (memory.recallForPrompt), asked from a new session of the
  // conversation's agent, so nothing is in its context; 10 lines for recall@10 and no token limit.
  const promptMemory = createMemoryService({
    db,
    bus: createBus(),
    config: { recall: { searchDefaultLimit: 10 } },
  });
  const results = {
    fts: emptyResult(),
    prompt: emptyResult(),
    hybrid: emptyResult(),
    baseline: emptyResult(),
  };
  let turns = 0;
  let skipped = 0;
  const timing = { fts: 0, prompt: 0, hybrid: 0, baseline: 0 };
  try {
    for (const [fileIndex, file] of files.entries()) {
      const data = JSON.parse(readFileSync(join(dataDir, file), 'utf8')) as Record<string, unknown>;
      const agentId = `locomo-${file.replace(/\.json$/, '')}`;
      const byMemoryId = await ingest(memory, agentId, data);
      turns += byMemoryId.size;
      const baseline = new MiniSearch<{ id: string; text: string }>({ fields: ['text'], storeFields: [] });
      for (const key of Object.keys(data).filter((name) => /^session_\d+$/.test(name))) {
        baseline.addAll((data[key] as Turn[]).map((turn) => ({ id: turn.dia_id, text: turnText(turn) })));
      }
      await memory.flushEmbeddings();
      for (const question of data.qa as Question[]) {
        const evidence = evidenceIds(question.evidence);
        if (evidence.length === 0) {
          skipped++;
          continue;
        }
        // The search parameters (config.recall.contextWeights, neighbourWeights) were chosen on the
        // conversations at even positions of the sorted file list only; the odd ones are held out.
        const half: Bucket = fileIndex % 2 === 0 ? 'tuning' : 'heldOut';
        const buckets: Bucket[] = question.category === 5 ? ['all', half] : ['all', 'answerable', half];
        for (const method of ['fts', 'prompt', 'hybrid'] as const) {
          const start = performance.now();
          let memoryIds: number[];
          if (method === 'prompt') {
            const block = await promptMemory.recallForPrompt({
              agentId,
              sessionKey: `agent:${agentId}:ask`,
              query: question.question,
              maxTokens: Number.MAX_SAFE_INTEGER,
            });
            memoryIds = [...block.matchAll(/^- \[[^\],]*#(\d+),/gm)].map((match) => Number(match[1]));
          } else {
            const hits = await memory.search({
              agentId,
              query: question.question,
              limit: 10,
              kind: 'entry',
              mode: method === 'hybrid' ? 'hybrid' : 'fts',
            });
            memoryIds = hits.map((hit) => hit.memoryId);
          }
          timing[method] += performance.now() - start;
          const ranked = memoryIds.map((memoryId) => byMemoryId.get(memoryId) ?? '');
          for (const bucket of buckets) score(results[method][bucket], ranked, evidence);
        }
        const start = performance.now();
        const ranked = baseline
          .search(question.question)
          .slice(0, 10)
          .map((hit) => String(hit.id));
        timing.baseline += performance.now() - start;
        for (const bucket of buckets) score(results.baseline[bucket], ranked, evidence);
      }
    }
  } finally {
    await db.close();
    await drop();
  }
  const percent = (value: number, count: number) => Number(((100 * value) / count).toFixed(1));
  const rows = (
    [
      [
        'agentd memory.search',
        'fts (bm25 over turn + 2 turns before, neighbour smoothing)',
        'fts',
        results.fts,
      ],
      [
        'agentd memory.search',
        `automatic recall: memory.recallForPrompt (at most ${promptMaxScoredRows} rows ranked, ${promptCandidates} candidates)`,
        'prompt',
        results.prompt,
      ],
      ['agentd memory.search', 'hybrid (fts + hashing embedder, RRF)', 'hybrid', results.hybrid],
      ['minisearch (plain BM25 baseline)', 'default options', 'baseline', results.baseline],
    ] as const
  ).map(([method, mode, timed, result]) => ({
    method,
    mode,
    'recall@5 %': percent(result.all.at5, result.all.questions),
    'recall@10 %': percent(result.all.at10, result.all.questions),
    'recall@5 % (cat 1-4)': percent(result.answerable.at5, result.answerable.questions),
    'recall@10 % (cat 1-4)': percent(result.answerable.at10, result.answerable.questions),
    'recall@10 % (tuning half)': percent(result.tuning.at10, result.tuning.questions),
    'recall@10 % (held-out half)': percent(result.heldOut.at10, result.heldOut.questions),
    questions: result.all.questions,
    'ms per query': Number((timing[timed] / result.all.questions).toFixed(2)),
  }));
  return {
    rows,
    notes: [
      `Database: ${postgresUrl ? `Postgres (${postgresUrl.replace(/\/\/[^@]*@/, '//')}, ts_rank)` : 'SQLite in memory (FTS5 bm25)'}.`,
      `${files.length} conversations, ${turns} turns, each conversation one agent and one session, ingested with memory.appendBatch per LoCoMo session ` +
        '(default limits: 64 active entries, so older turns are evicted to long-term memory and found there).',
      'Turn text is "<speaker>: <text>" plus the image caption when the turn shares a photo; the baseline indexes exactly the same strings.',
      `recall@k = mean over questions of the fraction of their evidence turns (dia_id) among the top k. ${skipped} questions without evidence ids are skipped; ` +
        '"cat 1-4" leaves out the adversarial category 5.',
      'The hashing embedder is deterministic and offline (feature hashing of words and character trigrams); it is not a semantic model, and fused at ' +
        'vectorWeight 1 it lowers recall: the hybrid row measures the fusion code, not what a real embedding model adds.',
      "The automatic-recall row calls memory.recallForPrompt, the code path of a chat turn, from a new session of the conversation's agent (nothing in " +
        "its context) with recall.searchDefaultLimit 10 and no token limit, and scores the addresses of the block's lines; it ranks at most " +
        "recall.promptMaxScoredRows rows (past them the commonest query terms are left out, then only the rarest term's newest matches are ranked) and " +
        'includes summaries; the fts row runs memory.search with the default search budget (recall.maxScoredRows, 5,000 rows).',
      'Against overfitting: the search parameters (two turns before each turn in the index, column weight 0.5, neighbour weights ' +
        '0.2 / 0.1 / 0.05, 100 candidates) were chosen from a handful of settings by recall@10 on the conversations at even positions of the sorted ' +
        'file list (26, 41, 43, 47, 49) only; the "held-out half" column is the other five. No rule looks at question ids, answers or evidence.',
      'Tried on the tuning half and not kept: pseudo-relevance feedback (about +0.5 point for a second full-text query), boosting turns of the ' +
        'speaker named in the question (no consistent gain), a stopword list of question words (lower on the held-out half), result ' +
        'diversification (lower), dropping terms that match over 10% of entries (lower).',
      'Before turn context and neighbour smoothing (same benchmark, 2026-11-22): fts 54.8 / 63.0 recall@5 / @10, hybrid 41.9 / 50.1, minisearch 46.5 / 54.0.',
      'With the two turns after each turn indexed as well (migration 0014, weight 0.2; replaced by 0015): fts 66.7 / 76.4 (2026-11-25, same benchmark).',
      'Dataset: LoCoMo (snap-research/locomo, data/locomo10.json), CC BY-NC 4.0, used for evaluation only.',
    ],
  };
}

export default {
  name: 'locomo',
  description:
    'LoCoMo evidence recall@5/@10 of memory.search (fts and hybrid) against a minisearch BM25 baseline',
  run,
};
