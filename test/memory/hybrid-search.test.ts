import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createBus } from '../../src/bus/index.js';
import { createMemoryService, type MemoryService } from '../../src/memory/index.js';
import { describeEachDatabase } from '../helpers/databases.js';
import { sessionRef } from './memory-fixtures.js';

/**
 * A deterministic stand-in for an embedding model behind an OpenAI-compatible `POST /embeddings`: known
 * two-word phrases, then words, map to concepts through a fixed table (what a real model learns from
 * text, including that "martial arts" and "arts and crafts" differ); any other word goes to one of six
 * hashed dimensions with a small weight.
 */
const conceptNames = [
  'martial',
  'europe',
  'pets',
  'music',
  'crafts',
  'law',
  'politics',
  'annoyance',
  'medicine',
  'theatre',
];
const phrases: Record<string, string> = {
  'martial arts': 'martial',
  'martial law': 'law',
  'european countries': 'europe',
  'pet peeve': 'annoyance',
  'musical instruments': 'music',
  'dental instruments': 'medicine',
};
const words: Record<string, string> = {};
for (const [concept, list] of Object.entries({
  martial: 'taekwondo karate judo kickboxing',
  europe: 'spain england france italy',
  pets: 'pet kitten cat puppy dog',
  music: 'cello violin piano guitar quartet',
  crafts: 'arts crafts',
  politics: 'european countries budget',
  medicine: 'dentist instruments',
  theatre: 'musical broadway',
})) {
  for (const word of list.split(' ')) words[word] = concept;
}
const dimensions = conceptNames.length + 6;

function conceptVector(text: string): number[] {
  const vector = new Array<number>(dimensions).fill(0);
  const tokens = text.toLowerCase().match(/[a-z]+/g) ?? [];
  for (let index = 0; index < tokens.length; index++) {
    const phrase = phrases[`${tokens[index]} ${tokens[index + 1]}`];
    const concept = phrase ?? words[tokens[index]!];
    if (phrase) index++;
    if (concept !== undefined) vector[conceptNames.indexOf(concept)]! += 1;
    else {
      let hash = 0;
      for (const char of tokens[index]!) hash = (hash * 31 + char.charCodeAt(0)) >>> 0;
      vector[conceptNames.length + (hash % 6)]! += 0.1;
    }
  }
  return vector;
}

interface EmbeddingRequest {
  model: string;
  input: string[];
  authorization: string | undefined;
}

function startFakeEmbeddingServer(): Promise<{ server: Server; url: string; requests: EmbeddingRequest[] }> {
  const requests: EmbeddingRequest[] = [];
  const server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => {
      body += chunk.toString('utf8');
    });
    request.on('end', () => {
      if (request.method !== 'POST' || request.url !== '/v1/embeddings') {
        response.writeHead(404).end();
        return;
      }
      const parsed = JSON.parse(body) as { model: string; input: string[] };
      requests.push({ ...parsed, authorization: request.headers.authorization });
      // Reversed on purpose: clients must order the vectors by `index`.
      const data = parsed.input
        .map((text, index) => ({ object: 'embedding', index, embedding: conceptVector(text) }))
        .reverse();
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ object: 'list', data, model: parsed.model }));
    });
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      resolve({ server, url: `http://127.0.0.1:${port}/v1`, requests });
    });
  });
}

// Each fact sits in its own session with a line of small talk, so neighbouring turns do not link them.
// No question shares a word with its fact, and each shares words with distractors that mean something
// else: the vocabulary mismatch keyword search cannot bridge.
const corpus = [
  { key: 'dojo', facts: ['I started taekwondo on Tuesdays, the kicks are hard', 'Good luck with that'] },
  { key: 'trip', facts: ['My sister flew to Spain and then England in May', 'Sounds lovely'] },
  { key: 'pets', facts: ['We brought home a kitten from the shelter', 'So cute'] },
  { key: 'music', facts: ['I play the cello in a quartet now', 'Impressive'] },
  { key: 'fair', facts: ['The arts and crafts fair was busy', 'Nice'] },
  { key: 'film', facts: ['The film was about martial law', 'Grim'] },
  { key: 'news', facts: ['The european budget talks between countries stalled', 'Boring'] },
  { key: 'peeve', facts: ['My pet peeve is loud chewing', 'Same here'] },
  { key: 'dentist', facts: ['The dentist laid out dental instruments', 'Ouch'] },
  { key: 'show', facts: ['The musical on broadway was long', 'Long indeed'] },
];
const questions = [
  { query: 'Which martial arts does she do?', answer: 'agent:alpha:dojo#1' },
  { query: 'Which european countries were visited?', answer: 'agent:alpha:trip#1' },
  { query: 'What pet did they get?', answer: 'agent:alpha:pets#1' },
  { query: 'Which musical instruments can she handle?', answer: 'agent:alpha:music#1' },
];

describeEachDatabase('hybrid search with an OpenAI-compatible embedding server', (getDb) => {
  let fake: Awaited<ReturnType<typeof startFakeEmbeddingServer>>;
  beforeAll(async () => {
    fake = await startFakeEmbeddingServer();
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => fake.server.close(() => resolve()));
  });

  async function seeded(): Promise<MemoryService> {
    const memory = createMemoryService({
      db: getDb(),
      bus: createBus(),
      config: {
        recall: { searchDefaultLimit: 3 },
        embeddings: {
          provider: 'openai',
          baseUrl: fake.url,
          model: 'fake-concepts',
          apiKeyEnv: 'FAKE_EMBEDDINGS_KEY',
          // A small corpus: fuse only the few best of each ranking, as a large one would in effect.
          candidateCount: 3,
        },
      },
      env: { FAKE_EMBEDDINGS_KEY: 'sk-test' },
    });
    for (const { key, facts } of corpus) {
      await memory.appendBatch(
        sessionRef(key),
        facts.map((content, index) => ({
          role: index % 2 ? ('assistant' as const) : ('user' as const),
          content,
        })),
      );
    }
    await memory.flushEmbeddings();
    return memory;
  }

  it('finds through the embeddings what keyword search misses (recall@3 over four questions)', async () => {
    const memory = await seeded();
    const recallAt3 = async (mode: 'fts' | 'hybrid') => {
      let found = 0;
      for (const { query, answer } of questions) {
        const hits = await memory.search({ agentId: 'alpha', query, mode });
        expect(hits.length).toBeLessThanOrEqual(3);
        expect(hits.every((hit) => hit.mode === mode)).toBe(true);
        if (hits.some((hit) => hit.address === answer)) found++;
      }
      return found / questions.length;
    };
    const lexical = await recallAt3('fts');
    const hybrid = await recallAt3('hybrid');
    expect(lexical).toBe(0);
    expect(hybrid).toBe(1);
    // The default mode with a provider configured is hybrid.
    const byDefault = await memory.search({ agentId: 'alpha', query: questions[0]!.query });
    expect(byDefault[0]).toMatchObject({ mode: 'hybrid' });
    expect(byDefault.map((hit) => hit.address)).toContain(questions[0]!.answer);
  });

  it('sends the configured model, the key from the environment, entries and the query', async () => {
    const memory = await seeded();
    const before = fake.requests.length;
    await memory.search({ agentId: 'alpha', query: 'What pet did they get?', mode: 'hybrid' });
    const indexed = fake.requests.slice(0, before).flatMap((request) => request.input);
    expect(indexed).toEqual(expect.arrayContaining(corpus.flatMap(({ facts }) => facts)));
    expect(fake.requests.slice(before)).toEqual([
      { model: 'fake-concepts', input: ['What pet did they get?'], authorization: 'Bearer sk-test' },
    ]);
    expect(fake.requests.every((request) => request.model === 'fake-concepts')).toBe(true);
  });
});
