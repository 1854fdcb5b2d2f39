import { expect, it } from 'vitest';
import {
  createHashingEmbedder,
  type EmbeddingProvider,
  memoryConfigSchema,
} from '../../../src/memory/index.js';
import {
  backfillEmbeddings,
  embedderFromConfig,
  flushEmbeddings,
  queueEmbedding,
} from '../../../src/memory/service/embedding-indexer.js';
import { appendBatch } from '../../../src/memory/service/ram.js';
import { describeEachDatabase } from '../../helpers/databases.js';
import { sessionRef } from '../memory-fixtures.js';
import { stepContext } from './helpers.js';

/** A hashing embedder that records what it was asked to embed, and fails while `failing` is set. */
function recordingEmbedder(): EmbeddingProvider & { seen: string[][]; failing: boolean } {
  const inner = createHashingEmbedder({ dimensions: 32 });
  const embedder = {
    model: inner.model,
    dimensions: inner.dimensions,
    seen: [] as string[][],
    failing: false,
    async embed(texts: ReadonlyArray<string>) {
      embedder.seen.push([...texts]);
      if (embedder.failing) throw new Error('provider down');
      return inner.embed(texts);
    },
  };
  return embedder as EmbeddingProvider & { seen: string[][]; failing: boolean };
}

describeEachDatabase('memory embedding indexer', (getDb) => {
  it('embeds written entries in batches in the background, skipping blank ones', async () => {
    const embedder = recordingEmbedder();
    const { ctx } = stepContext(getDb(), { embedder, config: { embeddings: { batchSize: 2 } } });
    await appendBatch(ctx, sessionRef(), [
      { role: 'user', content: 'one' },
      { role: 'assistant', content: '   ' },
      { role: 'user', content: 'two' },
      { role: 'assistant', content: 'three' },
    ]);
    await flushEmbeddings(ctx);
    expect(embedder.seen).toEqual([['one'], ['two', 'three']]);
    expect(ctx.embeddings.pending).toHaveLength(0);
  });

  it('a failed batch leaves its entries for the backfill', async () => {
    const embedder = recordingEmbedder();
    const { ctx } = stepContext(getDb(), { embedder });
    embedder.failing = true;
    await appendBatch(ctx, sessionRef(), [{ role: 'user', content: 'lost vector' }]);
    await flushEmbeddings(ctx);
    embedder.failing = false;
    expect(await backfillEmbeddings(ctx)).toBe(1);
    expect(embedder.seen.at(-1)).toEqual(['lost vector']);
    expect(await backfillEmbeddings(ctx)).toBe(0);
  });

  it('does nothing without a provider, for tombstones, or for unwritten entries', async () => {
    const { ctx } = stepContext(getDb());
    const entry = {
      rowId: 1,
      state: 'active',
      content: 'x',
    } as Parameters<typeof queueEmbedding>[1];
    queueEmbedding(ctx, entry);
    expect(ctx.embeddings.pending).toHaveLength(0);
    expect(await backfillEmbeddings(ctx)).toBe(0);
    const withProvider = stepContext(getDb(), { embedder: recordingEmbedder() });
    queueEmbedding(withProvider.ctx, { ...entry, state: 'tombstone' });
    queueEmbedding(withProvider.ctx, { ...entry, rowId: undefined });
    expect(withProvider.ctx.embeddings.pending).toHaveLength(0);
  });
});

it('builds the configured provider: hashing, OpenAI-compatible (key from the environment), or none', () => {
  const none = memoryConfigSchema.parse({});
  expect(embedderFromConfig(none, {})).toBeUndefined();
  const hash = embedderFromConfig(
    memoryConfigSchema.parse({ embeddings: { provider: 'hash', dimensions: 16 } }),
    {},
  );
  expect(hash?.dimensions).toBe(16);
  const openai = embedderFromConfig(
    memoryConfigSchema.parse({ embeddings: { provider: 'openai', model: 'text-embedding-3-small' } }),
    { env: { OPENAI_API_KEY: 'sk-test' } },
  );
  expect(openai?.model).toBe('text-embedding-3-small');
});
