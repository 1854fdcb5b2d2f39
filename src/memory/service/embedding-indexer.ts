import { createRequire } from 'node:module';
import type { SqlDatabase } from '../../store/index.js';
import type { Logger } from '../../util/index.js';
import type { MemoryConfig } from '../config.js';
import { createHashingEmbedder, createOpenAiEmbedder, type EmbeddingProvider } from '../embeddings.js';
import type { StoredEntry } from '../ltm-store.js';
import type { MemoryContext } from './context.js';

/**
 * The embedding indexer: entries are queued as they are written and embedded in the background, one batch
 * at a time, so a write never waits for the embedding provider.
 */
async function drainEmbeddings(ctx: MemoryContext, provider: EmbeddingProvider): Promise<void> {
  const { pending } = ctx.embeddings;
  while (pending.length > 0) {
    const batch = pending.splice(0, ctx.config.embeddings.batchSize);
    try {
      const vectors = await provider.embed(batch.map((entry) => entry.content));
      await ctx.ltm.insertVectors(
        batch.map((entry, index) => ({
          rowId: entry.rowId!,
          agentId: entry.agentId,
          vector: vectors[index]!,
        })),
        provider.model,
      );
    } catch (error) {
      ctx.logger.warn(
        { err: error, count: batch.length },
        'embedding failed; these entries stay keyword-searchable only',
      );
    }
  }
}

function startDraining(ctx: MemoryContext): void {
  const state = ctx.embeddings;
  if (!ctx.embedder || state.draining || state.pending.length === 0) return;
  state.draining = drainEmbeddings(ctx, ctx.embedder).finally(() => {
    state.draining = undefined;
    startDraining(ctx);
  });
}

/** Queues a written entry for embedding (nothing without a provider, for tombstones or blank content). */
export function queueEmbedding(ctx: MemoryContext, entry: StoredEntry): void {
  if (
    !ctx.embedder ||
    entry.rowId === undefined ||
    entry.state === 'tombstone' ||
    entry.content.trim() === ''
  )
    return;
  ctx.embeddings.pending.push(entry);
  startDraining(ctx);
}

/** Waits until queued embeddings are stored. */
export async function flushEmbeddings(ctx: MemoryContext): Promise<void> {
  while (ctx.embeddings.draining) await ctx.embeddings.draining;
}

/** Queues entries that have no vector yet (e.g. written before a restart); returns how many. */
export async function backfillEmbeddings(ctx: MemoryContext, limit = 1000): Promise<number> {
  const { embedder } = ctx;
  if (!embedder || ctx.writes.degradedReason !== undefined) return 0;
  const queued = new Set(ctx.embeddings.pending.map((entry) => entry.rowId));
  const missing = (await ctx.ltm.entriesWithoutVectors(embedder.model, limit)).filter(
    (entry) => !queued.has(entry.rowId),
  );
  for (const entry of missing) queueEmbedding(ctx, entry);
  await flushEmbeddings(ctx);
  return missing.length;
}

export function embedderFromConfig(
  config: MemoryConfig,
  options: { env?: Readonly<Record<string, string | undefined>>; fetch?: typeof globalThis.fetch },
): EmbeddingProvider | undefined {
  const settings = config.embeddings;
  if (settings.provider === 'hash') return createHashingEmbedder({ dimensions: settings.dimensions ?? 256 });
  if (settings.provider === 'openai') {
    const env = options.env ?? process.env;
    return createOpenAiEmbedder({
      baseUrl: settings.baseUrl,
      model: settings.model,
      ...(env[settings.apiKeyEnv] ? { apiKey: env[settings.apiKeyEnv] } : {}),
      ...(settings.dimensions ? { dimensions: settings.dimensions } : {}),
      timeoutMs: settings.timeoutMs,
      ...(options.fetch ? { fetch: options.fetch } : {}),
    });
  }
  return undefined;
}

/** Loads sqlite-vec into the SQLite connection when the store exposes its driver; false when unavailable. */
export function loadSqliteVec(db: SqlDatabase, logger: Logger): boolean {
  const driver = (
    db as { driver?: { loadExtension?: unknown; prepare?: (sql: string) => { get(): unknown } } }
  ).driver;
  if (!driver?.prepare) return false;
  try {
    driver.prepare('SELECT vec_version()').get();
    return true;
  } catch {
    // Not loaded yet.
  }
  try {
    const require = createRequire(import.meta.url);
    const sqliteVec = require('sqlite-vec') as { load(db: unknown): void };
    sqliteVec.load(driver);
    return true;
  } catch (error) {
    // An optional dependency: installs with `--omit=optional` (or platforms without a build) lack it.
    logger.warn(
      { err: error },
      'the optional package sqlite-vec could not be loaded (npm install sqlite-vec); vector similarity is computed in JS',
    );
    return false;
  }
}
