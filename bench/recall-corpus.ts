// The recall benchmarks' corpus: texts of 9–24 words drawn by Zipf's law from 5,000 words, each with one of
// 200 topic words, always the same for the same seed (bench/recall.bench.ts, bench/chat-turn-recall.ts).
import type { MemoryService } from '../src/memory/index.js';

export const corpusBatchSize = 500;
export const topics = Array.from({ length: 200 }, (_, index) => `topic${index.toString(36)}`);

/** Deterministic pseudo-random numbers (mulberry32), so every run indexes the same text. */
export function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let value = state;
    value = Math.imul(value ^ (value >>> 15), value | 1);
    value ^= value + Math.imul(value ^ (value >>> 7), value | 61);
    return ((value ^ (value >>> 14)) >>> 0) / 4294967296;
  };
}

// Zipf's law (s = 1) over 5,000 words whose most frequent ranks are English function words, as in real
// conversation; the rest are synthetic content words.
const functionWords = (
  'the of and to a in is it you that he was for on are with as i his they be at one have this from or had by ' +
  'but what some we can out other were all there when up use your how said an each she which do their time if ' +
  'will way about many then them would write like so these her long make thing see him two has look more day ' +
  'could go come did my no most who over know than call first people may down been now find any new work part ' +
  'take get place made live where after back little only round man year came show every good me give our under'
).split(' ');
const vocabulary = [
  ...functionWords,
  ...Array.from({ length: 5_000 - functionWords.length }, (_, index) => `w${index.toString(36)}x`),
];
const zipfCumulative = (() => {
  const weights = vocabulary.map((_, rank) => 1 / (rank + 1));
  const total = weights.reduce((sum, weight) => sum + weight, 0);
  let running = 0;
  return weights.map((weight) => (running += weight / total));
})();
export function word(next: () => number): string {
  const target = next();
  let low = 0;
  let high = zipfCumulative.length - 1;
  while (low < high) {
    const middle = (low + high) >> 1;
    if (zipfCumulative[middle]! < target) low = middle + 1;
    else high = middle;
  }
  return vocabulary[low]!;
}

export function sentence(next: () => number): { text: string; topic: string } {
  const topic = topics[Math.floor(next() * topics.length)]!;
  const words = Array.from({ length: 8 + Math.floor(next() * 16) }, () => word(next));
  words.splice(Math.floor(next() * words.length), 0, topic);
  return { text: words.join(' '), topic };
}

/**
 * Appends `memoryCount` entries in `sessions` sessions of `agentId` (keys `agent:<agentId>:s0`, `s1`, …, in
 * that order, 500 a transaction), always the same texts; resolves with the milliseconds it took.
 */
export async function ingestCorpus(
  memory: Pick<MemoryService, 'appendBatch'>,
  options: { memoryCount: number; sessions: number; agentId: string },
): Promise<number> {
  const { memoryCount, sessions, agentId } = options;
  const next = random(42);
  const start = performance.now();
  for (let session = 0; session < sessions; session++) {
    const ref = { sessionId: `${agentId}-${session}`, sessionKey: `agent:${agentId}:s${session}`, agentId };
    for (let offset = 0; offset < memoryCount / sessions; offset += corpusBatchSize) {
      await memory.appendBatch(
        ref,
        Array.from({ length: corpusBatchSize }, (_, index) => ({
          role: (offset + index) % 2 ? ('assistant' as const) : ('user' as const),
          content: sentence(next).text,
        })),
      );
    }
  }
  return performance.now() - start;
}
