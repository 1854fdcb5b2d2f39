import { createHash } from 'node:crypto';
import { z } from 'zod';
import { ErrorCodes, ProviderError, parseUntrustedJson } from '../util/index.js';
import { wordTokens } from './text.js';

/** Turns texts into L2-normalized vectors of a fixed size. */
export interface EmbeddingProvider {
  /** Stored with each vector; vectors of another model are ignored by search. */
  readonly model: string;
  readonly dimensions: number;
  embed(texts: ReadonlyArray<string>, options?: { signal?: AbortSignal }): Promise<Float32Array[]>;
}

export function normalizeVector(vector: Float32Array): Float32Array {
  let sum = 0;
  for (const value of vector) sum += value * value;
  if (sum === 0) return vector;
  const scale = 1 / Math.sqrt(sum);
  for (let index = 0; index < vector.length; index++) vector[index] = vector[index]! * scale;
  return vector;
}

function bucketOf(feature: string, dimensions: number): { index: number; sign: number } {
  const digest = createHash('sha1').update(feature).digest();
  return { index: digest.readUInt32LE(0) % dimensions, sign: digest[4]! & 1 ? 1 : -1 };
}

/**
 * A deterministic, offline embedder for tests and benchmarks: feature hashing of words (weight 1) and of
 * character trigrams inside words (weight 0.5), so "painting" and "paint" land near each other. It knows
 * no synonyms; it is a stand-in with the same interface as a real provider, not a semantic model.
 */
export function createHashingEmbedder(options: { dimensions?: number } = {}): EmbeddingProvider {
  const dimensions = options.dimensions ?? 256;
  const cache = new Map<string, { index: number; sign: number }>();
  const bucket = (feature: string) => {
    let hit = cache.get(feature);
    if (hit === undefined) {
      hit = bucketOf(feature, dimensions);
      if (cache.size < 200_000) cache.set(feature, hit);
    }
    return hit;
  };
  const embedOne = (text: string): Float32Array => {
    const vector = new Float32Array(dimensions);
    for (const word of wordTokens(text)) {
      const whole = bucket(`w:${word}`);
      vector[whole.index] = vector[whole.index]! + whole.sign;
      const padded = `^${word}$`;
      for (let start = 0; start + 3 <= padded.length; start++) {
        const gram = bucket(`g:${padded.slice(start, start + 3)}`);
        vector[gram.index] = vector[gram.index]! + gram.sign * 0.5;
      }
    }
    return normalizeVector(vector);
  };
  return {
    model: `hash-${dimensions}`,
    dimensions,
    embed: async (texts) => texts.map(embedOne),
  };
}

const embeddingsResponseSchema = z.object({
  data: z.array(z.object({ index: z.number().int().min(0), embedding: z.array(z.number()) })),
});

export interface OpenAiEmbedderOptions {
  baseUrl: string;
  model: string;
  apiKey?: string;
  dimensions?: number;
  timeoutMs?: number;
  fetch?: typeof globalThis.fetch;
  /** Largest response accepted. */
  maxResponseBytes?: number;
}

/** An OpenAI-compatible `POST /embeddings` client (OpenAI, Ollama, vLLM, llama.cpp, LM Studio, …). */
export function createOpenAiEmbedder(options: OpenAiEmbedderOptions): EmbeddingProvider {
  const fetchImpl = options.fetch ?? globalThis.fetch;
  const url = `${options.baseUrl.replace(/\/+$/, '')}/embeddings`;
  const timeoutMs = options.timeoutMs ?? 15_000;
  const maxResponseBytes = options.maxResponseBytes ?? 64 * 1024 * 1024;
  let dimensions = options.dimensions ?? 0;
  return {
    model: options.model,
    get dimensions() {
      return dimensions;
    },
    async embed(texts, callOptions = {}) {
      if (texts.length === 0) return [];
      const signals = [AbortSignal.timeout(timeoutMs), ...(callOptions.signal ? [callOptions.signal] : [])];
      let response: Response;
      try {
        response = await fetchImpl(url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}),
          },
          body: JSON.stringify({
            model: options.model,
            input: texts,
            ...(options.dimensions ? { dimensions: options.dimensions } : {}),
          }),
          signal: AbortSignal.any(signals),
        });
      } catch (error) {
        const timedOut = error instanceof Error && error.name === 'TimeoutError';
        throw new ProviderError({
          code: timedOut ? ErrorCodes.providerTimeout : ErrorCodes.providerUnavailable,
          message: `Embedding request to ${url} failed: ${(error as Error).message}`,
          retryable: true,
          cause: error,
        });
      }
      const body = await response.text();
      if (!response.ok) {
        throw new ProviderError({
          code:
            response.status === 429
              ? ErrorCodes.providerRateLimited
              : response.status === 401 || response.status === 403
                ? ErrorCodes.providerAuth
                : ErrorCodes.providerError,
          message: `Embedding request to ${url} returned HTTP ${response.status}: ${body.slice(0, 200)}`,
          retryable: response.status === 429 || response.status >= 500,
          statusCode: response.status,
        });
      }
      let parsed: z.infer<typeof embeddingsResponseSchema>;
      try {
        parsed = parseUntrustedJson(body, embeddingsResponseSchema, {
          maxBytes: maxResponseBytes,
          what: 'embeddings response',
        });
      } catch (error) {
        throw new ProviderError({
          code: ErrorCodes.providerError,
          message: `Embedding response from ${url} is malformed: ${(error as Error).message}`,
          cause: error,
        });
      }
      const vectors: Float32Array[] = new Array(texts.length);
      for (const item of parsed.data) {
        if (item.index < texts.length)
          vectors[item.index] = normalizeVector(Float32Array.from(item.embedding));
      }
      for (let index = 0; index < texts.length; index++) {
        const vector = vectors[index];
        if (vector === undefined || (dimensions !== 0 && vector.length !== dimensions)) {
          throw new ProviderError({
            code: ErrorCodes.providerError,
            message: `Embedding response from ${url} has no vector of the expected size for input ${index}.`,
          });
        }
        dimensions = vector.length;
      }
      return vectors;
    },
  };
}
