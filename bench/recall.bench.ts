// Recall latency over 100,000 memories: `memory.query` by topic and full-text `search` (BM25), p50/p99,
// on SQLite (a WAL file) and on the Postgres server at 127.0.0.1:5432 when one answers.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createBus } from '../src/bus/index.js';
import { createMemoryService } from '../src/memory/index.js';
import { createLtmStore } from '../src/memory/ltm-store.js';
import { ftsAnyOf, queryTerms, tsqueryAnyOf } from '../src/memory/text.js';
import {
  createPostgresDatabase,
  createSqliteDatabase,
  migrate,
  type SqlDatabase,
} from '../src/store/index.js';
import { freshPostgresSchema } from './postgres-schema.js';
import { corpusBatchSize, ingestCorpus, random, sentence, topics, word } from './recall-corpus.js';
import { percentile } from './stats.js';

// AGENTD_BENCH_RECALL_MEMORIES=1000000 measures the 1M point (SQLite only: AGENTD_BENCH_RECALL_POSTGRES=0).
const memoryCount = Number(process.env.AGENTD_BENCH_RECALL_MEMORIES ?? 100_000);
const sessions = 100;
const queriesPerKind = 500;
const postgresQueriesPerKind = 200;
/** The session ingested first: its rows have the smallest row ids. */
const oldestSession = 'agent:bench:s0';
/** The commonest word of the texts, in most entries. */
const commonWord = 'the';
const postgresUrl = process.env.AGENTD_BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/**
 * The same-run reference: BM25 over the entries' own words only (the index before migration 0014), queried
 * as memory.search queried it then. The shared machine's load moves absolute figures; the ratio to this
 * row does not move as much.
 */
async function plainBm25(db: SqlDatabase): Promise<(query: string) => Promise<number>> {
  if (db.dialect === 'sqlite') {
    await db.run(
      "CREATE VIRTUAL TABLE bench_plain_fts USING fts5 (content, content = 'memory_entries', content_rowid = 'id', tokenize = 'porter unicode61')",
    );
    await db.run("INSERT INTO bench_plain_fts (bench_plain_fts) VALUES ('rebuild')");
    return async (query) => {
      const rows = await db.all(
        'SELECT e.id, e.content, f.rank FROM (SELECT rowid, bm25(bench_plain_fts) AS rank FROM bench_plain_fts WHERE bench_plain_fts MATCH ? ' +
          "ORDER BY rank LIMIT 50) f JOIN memory_entries e ON e.id = f.rowid WHERE e.agent_id = 'bench' ORDER BY f.rank LIMIT 10",
        [ftsAnyOf(queryTerms(query))],
      );
      return rows.length;
    };
  }
  return async (query) => {
    const rows = await db.all(
      "SELECT e.id, e.content, ts_rank(e.search_vector, q, 1) AS rank FROM memory_entries e, to_tsquery('english', ?) q " +
        "WHERE e.search_vector @@ q AND e.agent_id = 'bench' ORDER BY rank DESC, e.id DESC LIMIT 10",
      [tsqueryAnyOf(queryTerms(query))],
    );
    return rows.length;
  };
}

async function measure(
  label: string,
  db: SqlDatabase,
  queries: number,
  notes: string[],
): Promise<Array<Record<string, string | number>>> {
  // Limits large enough that ingestion does not evict: the figure is about reading 100k rows.
  const memory = createMemoryService({
    db,
    bus: createBus(),
    config: { maxActiveEntries: 2_000, maxActiveTokens: 1_000_000 },
  });
  const ingestMs = await ingestCorpus(memory, { memoryCount, sessions, agentId: 'bench' });
  // The same store without a row budget: what every search cost before it, and the ranking it is compared to.
  const exactMemory = createMemoryService({
    db,
    bus: createBus(),
    config: { maxActiveEntries: 2_000, maxActiveTokens: 1_000_000, recall: { maxScoredRows: 1_000_000_000 } },
  });
  // Fresh statistics on Postgres, as its autovacuum keeps them on a live database. SQLite is measured as agentd
  // runs it, without statistics: ANALYZE here once hid plans that walked the agent's index (2026-11-29).
  if (db.dialect === 'postgres') await db.run('ANALYZE');
  if (db.dialect === 'sqlite') {
    // The index as the store keeps it: a search that sees it grown starts a background merge into one
    // segment. This loop never yields to timers, so the merge is run here, without the background pauses.
    const ltm = createLtmStore(db, { sqliteVec: false });
    const segments = await ltm.indexSegments();
    const started = performance.now();
    await ltm.mergeIndex();
    notes.push(
      `SQLite full-text index: ${segments} segments after ingestion, merged into ${await ltm.indexSegments()} before the queries ` +
        `(ltm.mergeIndex, the background merge's steps without its pauses: ${((performance.now() - started) / 1000).toFixed(1)} s).`,
    );
    const pragma = async (name: string) =>
      Number((await db.get<Record<string, number>>(`PRAGMA ${name}`))?.[name]);
    const fileMb = ((await pragma('page_count')) * (await pragma('page_size'))) / 1e6;
    notes.push(
      `SQLite page cache: ${(-(await pragma('cache_size')) / 1024).toFixed(1)} MiB for a file of ${fileMb.toFixed(0)} MB ` +
        "(a sixteenth of the file, never below the driver's own 16,000 KiB, fitted as commits grow it: docs/storage.md).",
    );
  }
  const next = random(7);
  const baseline = await plainBm25(db);
  const timings = {
    topic: [] as number[],
    sessionTopic: [] as number[],
    sessionCommon: [] as number[],
    sessionLatest: [] as number[],
    sessionRecall: [] as number[],
    search: [] as number[],
    searchCpu: [] as number[],
    exact: [] as number[],
    plain: [] as number[],
    prompt: [] as number[],
    promptCpu: [] as number[],
  };
  let topicItems = 0;
  let sessionTopicItems = 0;
  let sessionCommonItems = 0;
  let sessionLatestItems = 0;
  let sessionRecallItems = 0;
  let searchHits = 0;
  let exactHits = 0;
  /** Sum over queries of the share of the unbudgeted top 10 that the budgeted search also returns. */
  let agreement = 0;
  let plainHits = 0;
  let promptLines = 0;
  // Warm-up, then interleave the two kinds so load on the machine hits both alike.
  for (let index = 0; index < 50; index++)
    await memory.search({ agentId: 'bench', query: sentence(next).text.split(' ').slice(0, 4).join(' ') });
  for (let index = 0; index < queries; index++) {
    const topic = topics[Math.floor(next() * topics.length)]!;
    let start = performance.now();
    topicItems += (await memory.query({ agentId: 'bench', topic, limit: 25 })).length;
    timings.topic.push(performance.now() - start);
    // Within the oldest session: every other session's matches are newer (the dashboard's memory view).
    start = performance.now();
    sessionTopicItems += (
      await memory.query({ agentId: 'bench', sessionKey: oldestSession, topic, limit: 25 })
    ).length;
    timings.sessionTopic.push(performance.now() - start);
    start = performance.now();
    sessionCommonItems += (
      await memory.query({ agentId: 'bench', sessionKey: oldestSession, topic: commonWord, limit: 25 })
    ).length;
    timings.sessionCommon.push(performance.now() - start);
    // The same session's latest entries and its recall, without a topic (the memory view's first page).
    start = performance.now();
    sessionLatestItems += (await memory.query({ agentId: 'bench', sessionKey: oldestSession, limit: 25 }))
      .length;
    timings.sessionLatest.push(performance.now() - start);
    start = performance.now();
    sessionRecallItems += (await memory.recall({ agentId: 'bench', sessionKey: oldestSession, limit: 25 }))
      .length;
    timings.sessionRecall.push(performance.now() - start);
    const query = `what did we say about ${topic} and ${word(next)} ${word(next)}?`;
    // Its CPU time too: on a shared machine the wall clock also counts the time other processes held the CPU.
    const searchCpuStart = process.cpuUsage();
    start = performance.now();
    const hits = await memory.search({ agentId: 'bench', query, limit: 10 });
    timings.search.push(performance.now() - start);
    const searchCpu = process.cpuUsage(searchCpuStart);
    timings.searchCpu.push((searchCpu.user + searchCpu.system) / 1000);
    searchHits += hits.length;
    start = performance.now();
    const exact = await exactMemory.search({ agentId: 'bench', query, limit: 10 });
    timings.exact.push(performance.now() - start);
    exactHits += exact.length;
    const found = new Set(hits.map((hit) => hit.address));
    agreement += exact.length === 0 ? 1 : exact.filter((hit) => found.has(hit.address)).length / exact.length;
    start = performance.now();
    plainHits += await baseline(query);
    timings.plain.push(performance.now() - start);
    // Automatic recall: what a chat turn costs before the model call (search, minus what is in context).
    // Its CPU time too (process.cpuUsage: this process, all threads), what the turn costs the machine.
    const cpuStart = process.cpuUsage();
    start = performance.now();
    const block = await memory.recallForPrompt({ agentId: 'bench', sessionKey: oldestSession, query });
    timings.prompt.push(performance.now() - start);
    const cpu = process.cpuUsage(cpuStart);
    timings.promptCpu.push((cpu.user + cpu.system) / 1000);
    promptLines += block === '' ? 0 : block.split('\n').length - 1;
  }
  const row = (kind: string, values: number[], found: number, agreed?: number) => {
    const sorted = [...values].sort((left, right) => left - right);
    return {
      backend: label,
      operation: kind,
      'p50 ms': Number(percentile(sorted, 50).toFixed(3)),
      'p90 ms': Number(percentile(sorted, 90).toFixed(3)),
      'p99 ms': Number(percentile(sorted, 99).toFixed(3)),
      'results per query': Number((found / values.length).toFixed(1)),
      'top-10 agreement with unbudgeted %':
        agreed === undefined ? '' : Number(((100 * agreed) / values.length).toFixed(1)),
      [`ingest s (${memoryCount / 1000}k)`]: Number((ingestMs / 1000).toFixed(1)),
    };
  };
  return [
    row('query by topic (limit 25)', timings.topic, topicItems),
    row('query by topic within the oldest session (limit 25)', timings.sessionTopic, sessionTopicItems),
    row(
      `query of "${commonWord}" within the oldest session (limit 25)`,
      timings.sessionCommon,
      sessionCommonItems,
    ),
    row('latest of the oldest session, no topic (limit 25)', timings.sessionLatest, sessionLatestItems),
    row('recall of the oldest session (limit 25)', timings.sessionRecall, sessionRecallItems),
    row('FTS search (limit 10)', timings.search, searchHits, agreement),
    row('FTS search (limit 10), CPU ms', timings.searchCpu, searchHits, agreement),
    row('FTS search without a row budget (limit 10)', timings.exact, exactHits),
    row('reference: plain BM25, own words only (limit 10)', timings.plain, plainHits),
    row('automatic recall: recallForPrompt', timings.prompt, promptLines),
    row('automatic recall: recallForPrompt, CPU ms', timings.promptCpu, promptLines),
  ];
}

async function run() {
  const rows: Array<Record<string, string | number>> = [];
  const notes = [
    `${memoryCount.toLocaleString('en')} entries in ${sessions} sessions of one agent, ingested through memory.appendBatch (${corpusBatchSize} per transaction), then ANALYZE on Postgres (as its autovacuum keeps statistics; SQLite has none, as agentd runs it); ` +
      'texts of 9–24 words drawn by Zipf (s=1) from 5,000 words whose top ranks are English function words, plus one of 200 topic words.',
    `${queriesPerKind} (SQLite) / ${postgresQueriesPerKind} (Postgres) queries of each kind, interleaved, after 50 warm-up searches. query = memory.query({ topic }) (FTS phrase match, newest first), also within the oldest session (s0, whose entries every other session's follow) by the same topic and by "${commonWord}", the commonest word, and without a topic (its latest 25, memory.query and memory.recall); ` +
      'search = memory.search (stopwords dropped, OR of the terms, BM25 via FTS5 bm25() / Postgres ts_rank over each entry and the two turns before it, then neighbour smoothing), ' +
      'with the default row budget (recall.maxScoredRows 5,000: past it the commonest terms are left out, and when even the rarest term matches more rows, its newest matches are ranked: on SQLite by column without bm25(), on Postgres by ts_rank; Postgres has the budget since 2026-11-29); ' +
      '"without a row budget" runs the same search with the budget lifted (the ranking before it), and the agreement column is the share of that top 10 the budgeted search returns. ' +
      'recallForPrompt ranks at most recall.promptMaxScoredRows (200) rows and smooths recall.promptCandidates (20) candidates read with their text in the ranking query; ' +
      'its CPU row is process.cpuUsage around the same calls (user + system, this process). ' +
      'The reference row runs, in the same loop, the single query memory.search ran before turn context (own words only, index built in the same database). ' +
      'recallForPrompt = memory.recallForPrompt for session s0 (search with the in-context entries excluded); its results column counts memory lines in the block.',
  ];
  const dir = mkdtempSync(join(tmpdir(), 'agentd-bench-recall-'));
  try {
    const sqlite = createSqliteDatabase({ path: join(dir, 'recall.db') });
    try {
      await migrate(sqlite);
      rows.push(...(await measure('sqlite', sqlite, queriesPerKind, notes)));
    } finally {
      await sqlite.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const postgresWanted = process.env.AGENTD_BENCH_RECALL_POSTGRES !== '0';
  const schema = postgresWanted ? await freshPostgresSchema(postgresUrl, 'agentd_bench_recall') : undefined;
  if (schema) {
    try {
      const postgres = createPostgresDatabase({
        connectionString: postgresUrl,
        schema: schema.name,
        poolSize: 4,
        settings: { synchronous_commit: 'off' },
      });
      try {
        await migrate(postgres);
        rows.push(...(await measure('postgres', postgres, postgresQueriesPerKind, notes)));
      } finally {
        await postgres.close();
      }
    } finally {
      await schema.drop();
    }
    notes.push(
      `Postgres: ${postgresUrl.replace(/\/\/[^@]*@/, '//')} in a fresh schema, synchronous_commit=off (ingest only; reads are unaffected).`,
    );
  } else {
    notes.push(
      postgresWanted
        ? `Postgres at ${postgresUrl.replace(/\/\/[^@]*@/, '//')} did not answer; only SQLite was measured.`
        : 'Postgres was not measured (AGENTD_BENCH_RECALL_POSTGRES=0).',
    );
  }
  notes.push('Target: p99 under 10 ms on SQLite.');
  return { rows, notes };
}

export default {
  name: 'recall',
  description: `memory.query by topic and BM25 full-text search over ${memoryCount.toLocaleString('en')} memories, p50/p99, SQLite and Postgres`,
  run,
};
